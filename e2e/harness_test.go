package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// devProc is a running `gpuaas dev`.
type devProc struct {
	cmd       *exec.Cmd
	stderr    *syncBuffer
	done      chan error
	dataDir   string
	configDir string
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine and readers.
type syncBuffer struct {
	// mu protects buf.
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tempDir returns a directory the postgres account can traverse (t.TempDir
// is 0700 and root-owned), removed at cleanup.
func tempDir(t *testing.T, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startDev starts `gpuaas dev` with args and waits for its banner.
func startDev(t *testing.T, dataDir, configDir string, args ...string) *devProc {
	t.Helper()
	return startDevBin(t, binary, dataDir, configDir, args...)
}

// loggedInDev starts `gpuaas dev` (startDev with the dev password in a
// file and args) in fresh data and config directories and logs the CLI in
// as the dev admin; it returns the platform and its config directory.
func loggedInDev(t *testing.T, args ...string) (*devProc, string) {
	t.Helper()
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, append([]string{"--password-file", pwFile}, args...)...)
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	return dev, cfg
}

// mustRun returns a function that runs the CLI with no input, fails the
// test on a non-zero exit and returns its standard output, trimmed.
func (p *devProc) mustRun(t testing.TB) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		r := p.gpuaas(t, "", args...)
		if r.code != 0 {
			t.Fatalf("gpuaas %v: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
}

// startDevBin is startDev with another gpuaas binary (benchmarks use one
// built without -race); it stops the platform when tb ends.
func startDevBin(t testing.TB, bin, dataDir, configDir string, args ...string) *devProc {
	t.Helper()
	args = append([]string{"dev", "--data", dataDir, "--nats-port", "0", "--ssh-port", "0"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+configDir)
	p := &devProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1), dataDir: dataDir, configDir: configDir}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	// Last: whatever failed, the platform's log tells what it did.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gpuaas dev's output:\n%s", p.stderr.String())
		}
	})
	t.Cleanup(func() { p.stop(t) })
	testutil.EventuallyWithin(t, 3*time.Minute, "gpuaas dev to come up", func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("gpuaas dev exited early (%v)", err)
		default:
		}
		return strings.Contains(p.stderr.String(), "gpuaas dev is running")
	})
	return p
}

// stop sends SIGINT and waits for a clean exit.
func (p *devProc) stop(t testing.TB) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Errorf("gpuaas dev exited with %v:\n%s", err, p.stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("gpuaas dev did not stop on SIGINT:\n%s", p.stderr.String())
	}
}

// result of one CLI run.
type result struct {
	stdout, stderr string
	code           int
}

// gpuaas runs the CLI against p's config with stdin.
func (p *devProc) gpuaas(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+p.configDir, "NO_COLOR=1")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("run gpuaas %v: %v", args, err)
	}
	return result{out.String(), errOut.String(), code}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
