package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/creack/pty"
)

// TestNoTerminalQueryAtStartup runs gpuaas on a pseudo-terminal that never
// answers and checks it writes no query (bubbletea's init would ask for the
// background colour and wait for a reply; see internal/termquiet).
func TestNoTerminalQueryAtStartup(t *testing.T) {
	cmd := exec.Command(binary, "help", "exit-codes")
	cmd.Env = append(os.Environ(), "TERM=xterm-256color", "GPUAAS_CONFIG_DIR="+t.TempDir())
	f, err := pty.Start(cmd)
	if err != nil {
		t.Fatalf("start on a pty: %v", err)
	}
	defer f.Close()
	var out bytes.Buffer
	_, _ = io.Copy(&out, f) // returns EIO once the child has exited
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gpuaas help exit-codes: %v\n%q", err, out.String())
	}
	for _, q := range []string{"\x1b]11;?", "\x1b]10;?", "\x1b[6n", "\x1b[c"} {
		if bytes.Contains(out.Bytes(), []byte(q)) {
			t.Errorf("gpuaas wrote the terminal query %q at start-up:\n%q", q, out.String())
		}
	}
	if !bytes.Contains(out.Bytes(), []byte("20")) {
		t.Errorf("help exit-codes did not print the codes:\n%q", out.String())
	}
}
