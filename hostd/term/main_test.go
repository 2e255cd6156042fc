package term_test

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/volsftp"
)

// TestMain runs the volume sessions' sftp process when the terminal
// server under test starts this binary as it (volumeSFTPCommand), as
// `gpuaas hostd volume-sftp` does for the real one.
func TestMain(m *testing.M) {
	if len(os.Args) > 3 && os.Args[1] == "hostd" && os.Args[2] == "volume-sftp" {
		os.Exit(volsftp.Main(os.Args[3:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// volumeSFTPCommand is term.Config.VolumeSFTP for tests: this binary.
func volumeSFTPCommand() []string { return []string{os.Args[0], "hostd", "volume-sftp"} }
