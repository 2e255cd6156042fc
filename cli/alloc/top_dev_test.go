package alloc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/devenv"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// devTop is the platform on this machine (devenv: controld and sim
// hosts whose GPUs report telemetry), logged in as its admin, with an
// active bare-metal allocation whose GPUs top can read.
func devTop(t *testing.T) (*api.Client, string) {
	t.Helper()
	ctx := context.Background()
	env, err := devenv.Start(ctx, devenv.Config{DataDir: t.TempDir(), DatabaseURL: testutil.Postgres(t, controldtest.Template),
		Hosts: 2, AdminPassword: "top test password", Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	login, err := env.Controld.Identity().Login(ctx, env.Controld.Pool(), devenv.AdminEmail, "top test password")
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := api.SessionConnOptions(login.Token)
	nc, err := bus.Connect(env.NATSURL, t.Name(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := api.NewClient(nc, api.WithToken(login.Token))
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 2*time.Minute, "the allocation's GPU telemetry", func() bool {
		top, err := c.AllocTop(ctx, a.ID)
		return err == nil && len(top.GPUs) == 8
	})
	return c, a.ID
}

// runTop runs topRun and waits for it to end (a deadline, not a timing
// goal: the bug was that it never did).
func runTop(t *testing.T, opts *TopOptions) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- topRun(context.Background(), opts) }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("alloc top did not end")
	}
	return nil
}

// TestAllocTopEndsPipedAndOnQ is the regression test of "`alloc top`
// never ends when piped and ignores q": piped without --count it prints
// one refresh (headerless rows, one per GPU) and ends; on a terminal it
// ends when q is pressed, and gives the terminal back as it found it.
func TestAllocTopEndsPipedAndOnQ(t *testing.T) {
	c, id := devTop(t)
	client := func() (*api.Client, error) { return c, nil }

	t.Run("piped", func(t *testing.T) {
		ios, _, out, _ := cmdtest.Streams(false)
		if err := runTop(t, &TopOptions{IO: ios, Client: client, Now: time.Now, ID: id, Interval: time.Second}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 8 || strings.HasPrefix(lines[0], "GPU") || len(strings.Split(lines[0], "\t")) != 7 {
			t.Fatalf("piped top printed %q; want one refresh: 8 tab-separated rows of 7 columns", out.String())
		}
	})

	t.Run("q", func(t *testing.T) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		defer tty.Close()
		before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		ios, _, _, _ := cmdtest.Streams(true)
		ios.In = tty
		ios.SetStdinTTY(true)
		lb := &lockedBuffer{}
		ios.Out = lb
		done := make(chan error, 1)
		go func() {
			done <- topRun(context.Background(), &TopOptions{IO: ios, Client: client, Now: time.Now, ID: id, Interval: time.Second})
		}()
		testutil.EventuallyWithin(t, time.Minute, "the first refresh", func() bool { return strings.Contains(lb.String(), "GPU") })
		// In cbreak mode the key reaches top without Enter.
		if _, err := ptmx.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatal("alloc top did not end on q")
		}
		after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		if after.Lflag != before.Lflag {
			t.Errorf("terminal local flags %#x after top; want them restored to %#x", after.Lflag, before.Lflag)
		}
	})
}
