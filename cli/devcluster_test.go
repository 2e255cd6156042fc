package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/daemon"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/devenv"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// lockedBuffer is an output stream a test reads while a command writes.
type lockedBuffer struct {
	// mu protects b.
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runCLIIn is runCLI with stdin.
func runCLIIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ios, in, out, errOut := cmdutil.Test()
	in.WriteString(stdin)
	f := NewFactory(ios)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = run(ctx, f, args)
	return code, out.String(), errOut.String()
}

// TestDevClusterServesWithoutOneNATSServerAndOneControld: `gpuaas dev
// --cluster` runs 3 NATS servers (JetStream R3) and 2 controld replicas
// and says so; a user logs in and allocates; with one NATS server and one
// controld replica (the first: it held the singletons) stopped, the CLI
// still logs in, lists, allocates and releases.
func TestDevClusterServesWithoutOneNATSServerAndOneControld(t *testing.T) {
	isolate(t)
	dsn := testutil.Postgres(t, controldtest.Template)
	// As root the sim hosts' users are real: they must reach their homes.
	data, err := os.MkdirTemp("", "gpuaas-devcluster-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(data) })
	const password = "cluster dev password"
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	devOut := &lockedBuffer{}
	ios := &cmdutil.IOStreams{In: strings.NewReader(""), Out: devOut, ErrOut: devOut}
	f := NewFactory(ios)
	defer f.Close()
	started := make(chan *devenv.Env, 1)
	cmd := daemon.NewCmdDev(f, NewSSHRootCmd, func(ctx context.Context, opts *daemon.DevOptions) error {
		opts.DatabaseURL = dsn
		opts.Started = func(env *devenv.Env) { started <- env }
		return daemon.RunDev(ctx, opts)
	})
	cmd.SetArgs([]string{"--cluster", "--data", data, "--ssh-port", "0", "--hosts", "1", "--password-file", pwFile,
		"--log-level", "warn"})
	ctx, cancel := context.WithCancel(context.Background())
	devDone := make(chan error, 1)
	go func() { devDone <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-devDone; err != nil {
			t.Errorf("gpuaas dev --cluster: %v", err)
		}
		if t.Failed() {
			t.Logf("gpuaas dev's output:\n%s", devOut.String())
		}
	})
	var env *devenv.Env
	select {
	case env = <-started:
	case err := <-devDone:
		devDone <- err
		t.Fatalf("gpuaas dev --cluster exited early: %v", err)
	}

	banner := devOut.String()
	for _, want := range []string{"gpuaas-dev-1 on nats://127.0.0.1:", "gpuaas-dev-3 on nats://127.0.0.1:",
		"cluster of 3, JetStream with 3 replicas", "2 replicas", "controld 2 http://127.0.0.1:"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	if n := strings.Count(env.NATSURL, ","); n != 2 {
		t.Fatalf("server URL %q; want 3 servers", env.NATSURL)
	}

	mustRun := func(stdin string, args ...string) string {
		t.Helper()
		code, stdout, stderr := runCLIIn(t, stdin, args...)
		if code != 0 {
			t.Fatalf("gpuaas %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return stdout
	}
	allocate := func() api.Allocation {
		t.Helper()
		var a api.Allocation
		out := mustRun("", "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--wait", "--json")
		if err := json.Unmarshal([]byte(out), &a); err != nil || a.State != api.AllocActive {
			t.Fatalf("alloc create --wait: %q (%v); want an active allocation", out, err)
		}
		return a
	}
	mustRun(password+"\n", "login", "--password-stdin")
	first := allocate()

	env.NATSCluster.Stop(0)
	if err := env.StopControld(0); err != nil {
		t.Fatalf("stop controld replica 1: %v", err)
	}
	t.Logf("stopped NATS server %s (%s) and controld replica 1", env.NATSCluster.Name(0), env.NATSCluster.ServerURL(0))

	mustRun(password+"\n", "login", "--password-stdin")
	if out := mustRun("", "whoami"); !strings.Contains(out, devenv.AdminEmail) {
		t.Fatalf("whoami: %q", out)
	}
	second := allocate()
	if out := mustRun("", "alloc", "list"); !strings.Contains(out, first.ID) || !strings.Contains(out, second.ID) {
		t.Fatalf("alloc list: %q; want %s and %s", out, first.ID, second.ID)
	}
	mustRun("", "alloc", "release", first.ID, "--wait")
}
