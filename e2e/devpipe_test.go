package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// simAccounts lists the sim hosts' POSIX accounts (GECOS "gpuaas sim
// user") whose home is under dataDir.
func simAccounts(t *testing.T, dataDir string) []string {
	t.Helper()
	out, err := exec.Command("getent", "passwd").Output()
	if err != nil {
		t.Fatalf("getent passwd: %v", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 6 && f[4] == "gpuaas sim user" && strings.HasPrefix(f[5], dataDir+"/") {
			names = append(names, f[0])
		}
	}
	return names
}

// TestDevCleansUpWhenItsPipeBreaks is the regression test of "`make dev |
// tee` and Ctrl-C leaves users and processes behind": the reader of gpuaas
// dev's output goes away (tee dies with the Ctrl-C), then SIGINT; the
// clean-up's log lines hit a broken pipe, and gpuaas dev still stops
// cleanly (no death by SIGPIPE) and removes the renters' POSIX accounts.
func TestDevCleansUpWhenItsPipeBreaks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sim hosts make POSIX accounts only as root")
	}
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "dev", "--data", data, "--nats-port", "0", "--ssh-port", "0", "--password-file", pwFile)
	cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+cfg)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})
	out := &syncBuffer{}
	go func() { _, _ = io.Copy(out, r) }()
	testutil.EventuallyWithin(t, 3*time.Minute, "gpuaas dev to come up", func() bool {
		return strings.Contains(out.String(), "gpuaas dev is running")
	})
	dev := &devProc{dataDir: data, configDir: cfg}
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	dev.createActive(t, "--sku", "h100-baremetal")
	if got := simAccounts(t, data); len(got) == 0 {
		t.Fatalf("no sim account under %s while a bare-metal allocation is active", data)
	}

	r.Close() // tee is gone
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("gpuaas dev did not stop on SIGINT; its output until the pipe broke:\n%s", out.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("gpuaas dev died of %v during its clean-up", ws.Signal())
	}
	if err != nil {
		t.Errorf("gpuaas dev exited with %v", err)
	}
	if left := simAccounts(t, data); len(left) != 0 {
		var b bytes.Buffer
		ps, _ := exec.Command("ps", "-o", "user,pid,cmd", "-u", strings.Join(left, ",")).CombinedOutput()
		b.Write(ps)
		t.Fatalf("accounts left behind: %v; their processes:\n%s", left, b.String())
	}
}
