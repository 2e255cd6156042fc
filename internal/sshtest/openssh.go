package sshtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"testing"
	"time"
)

// ToolTimeout bounds one run of an OpenSSH tool.
const ToolTimeout = time.Minute

// NeedOpenSSH skips the test when one of tools (ssh, scp, sftp) is not
// installed.
func NeedOpenSSH(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("OpenSSH's %s not installed: %v", tool, err)
		}
	}
}

// RunTool runs one of OpenSSH's tools (ssh, scp, sftp) with args and
// stdin (nil for none), and returns its output and exit code. A tool
// that cannot be started fails the test; one still running after
// ToolTimeout is killed (exit code -1).
func RunTool(t testing.TB, stdin io.Reader, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ToolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		t.Fatalf("%s: %v", name, err)
	}
	return out.String(), errOut.String(), code
}
