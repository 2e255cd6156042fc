package alloc

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestNewCmdWait(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    WaitOptions
		wantErr string
	}{
		{name: "defaults", args: []string{"a-1"}, want: WaitOptions{ID: "a-1", For: "active", Timeout: 30 * time.Minute}},
		{name: "released", args: []string{"a-1", "--for", "released", "--timeout", "90s"},
			want: WaitOptions{ID: "a-1", For: "released", Timeout: 90 * time.Second}},
		{name: "bad state", args: []string{"a-1", "--for", "failed"}, wantErr: `--for must be active or released, got "failed"`},
		{name: "zero timeout", args: []string{"a-1", "--timeout", "0s"}, wantErr: "--timeout must be positive"},
		{name: "no id", args: nil, wantErr: "requires an allocation ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *WaitOptions
			cmd := NewCmdWait(cmdtest.Factory(ios), func(_ context.Context, o *WaitOptions) error { got = o; return nil })
			err := cmdtest.Execute(cmd, tt.args...)
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tt.want.ID || got.For != tt.want.For || got.Timeout != tt.want.Timeout {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestReached(t *testing.T) {
	active := []string{api.AllocActive}
	released := []string{api.AllocReleased}
	tests := []struct {
		name     string
		state    string
		reason   string
		want     []string
		wantDone bool
		wantErr  string
	}{
		{"active reached", api.AllocActive, "", active, true, ""},
		{"still provisioning", api.AllocProvisioning, "", active, false, ""},
		{"queued", api.AllocRequested, "waiting for capacity", active, false, ""},
		{"failed", api.AllocFailed, "readiness: injected failure", active, true, "allocation a-1 failed: readiness: injected failure"},
		{"release failed", api.AllocReleaseFailed, "wipe: disk busy", released, true, "allocation a-1 release_failed: wipe: disk busy"},
		{"released instead of active", api.AllocReleased, "", active, true, "allocation a-1 was released before it became active"},
		{"releasing instead of active", api.AllocReleasing, "released by user", active, true,
			"allocation a-1 is being released; it will not become active: released by user"},
		{"releasing on the way to released", api.AllocReleasing, "", released, false, ""},
		{"released reached", api.AllocReleased, "", released, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, err := reached(&api.Allocation{ID: "a-1", State: tt.state, Reason: tt.reason}, tt.want)
			if done != tt.wantDone {
				t.Errorf("got done %v; want %v", done, tt.wantDone)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("got %v; want no error", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr || cmdutil.ExitCodeOf(err) != cmdutil.ExitAllocFailed {
				t.Errorf("got %v (exit %d); want %q, exit 20", err, cmdutil.ExitCodeOf(err), tt.wantErr)
			}
		})
	}
}

func TestPlainProgressLines(t *testing.T) {
	ios, _, _, errOut := cmdtest.Streams(false)
	v := newProgressView(ios, "a-1")
	if _, ok := v.(*plainProgress); !ok {
		t.Fatalf("got %T for a stderr that is not a terminal; want plain lines", v)
	}
	at := now
	v.state(&api.Allocation{ID: "a-1", State: api.AllocProvisioning})
	v.phase(api.PhaseTiming{Phase: "lease", Status: api.PhaseStarted, At: at})
	v.phase(api.PhaseTiming{Phase: "lease", Status: api.PhaseDone, ElapsedMS: 12, At: at})
	v.state(&api.Allocation{ID: "a-1", State: api.AllocProvisioning}) // no change, no line
	v.phase(api.PhaseTiming{Phase: "readiness", Status: api.PhaseFailed, ElapsedMS: 3004, Message: "no answer", At: at})
	v.state(&api.Allocation{ID: "a-1", State: api.AllocFailed})
	v.stop()
	want := "a-1 is provisioning\n" +
		"  lease            started \n" +
		"  lease            done         12ms\n" +
		"  readiness        failed     3004ms  no answer\n" +
		"a-1 is failed\n"
	if got := errOut.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// waitEnv is a real controld with the test project's admin as the client.
func waitEnv(t *testing.T) (*controldtest.Env, *api.Client) {
	t.Helper()
	env := controldtest.Start(t, controldtest.Options{})
	return env, env.UserClient(t, env.Admin.ID, env.AdminToken)
}

func TestWaitTimesOut(t *testing.T) {
	_, c := waitEnv(t)
	ctx := context.Background()
	// No hostd runs: a placed allocation stays provisioning.
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	ios, _, _, errOut := cmdtest.Streams(false)
	_, err = waitFor(ctx, ios, c, a.ID, 300*time.Millisecond, api.AllocActive)
	if cmdutil.ExitCodeOf(err) != cmdutil.ExitWaitTimeout {
		t.Fatalf("got %v (exit %d); want exit 21", err, cmdutil.ExitCodeOf(err))
	}
	want := "allocation " + a.ID + " is still provisioning after 300ms (waiting for active)"
	if err.Error() != want {
		t.Errorf("got %q; want %q", err, want)
	}
	if got := errOut.String(); got != a.ID+" is provisioning\n" {
		t.Errorf("got stderr %q; want the state line", got)
	}
}

func TestWaitNotFound(t *testing.T) {
	_, c := waitEnv(t)
	ios, _, _, _ := cmdtest.Streams(false)
	_, err := waitFor(context.Background(), ios, c, "a-nothere", time.Minute, api.AllocActive)
	if !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("got %v; want not_found", err)
	}
}

// TestWaitFollowsEvents shows that events, not polling, end a wait: the
// fallback poll is an hour, yet the wait sees the release at once.
func TestWaitFollowsEvents(t *testing.T) {
	saved := pollWithEvents
	pollWithEvents = time.Hour
	t.Cleanup(func() { pollWithEvents = saved })
	_, c := waitEnv(t)
	ctx := context.Background()

	tests := []struct {
		name     string
		sku      string
		want     string
		wantCode int
		wantErr  string
	}{
		// A queued request released before placement goes straight to
		// released.
		{"released", "h100-slice", api.AllocReleased, cmdutil.ExitOK, ""},
		// A provisioning one starts releasing: it will never be active.
		{"not active any more", "h200-slice", api.AllocActive, cmdutil.ExitAllocFailed, "is being released; it will not become active"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: tt.sku, GPUs: 1, Queue: true})
			if err != nil {
				t.Fatal(err)
			}
			ios, _, _, _ := cmdtest.Streams(false)
			errOut := &lockedBuffer{}
			ios.ErrOut = errOut
			type result struct {
				a   *api.Allocation
				err error
			}
			done := make(chan result, 1)
			go func() {
				got, err := waitFor(ctx, ios, c, a.ID, time.Minute, tt.want)
				done <- result{got, err}
			}()
			// Release once the wait has read the allocation (and so has
			// subscribed before it).
			testutil.EventuallyWithin(t, 10*time.Second, "the wait to print the state", func() bool {
				return strings.Contains(errOut.String(), " is ")
			})
			if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the wait did not notice the release")
			}
			if code := cmdutil.ExitCodeOf(r.err); code != tt.wantCode || (tt.wantErr != "" && !strings.Contains(r.err.Error(), tt.wantErr)) {
				t.Fatalf("got %v (exit %d); want exit %d %q", r.err, code, tt.wantCode, tt.wantErr)
			}
			if tt.wantCode == cmdutil.ExitOK && r.a.State != api.AllocReleased {
				t.Errorf("got state %s; want released", r.a.State)
			}
		})
	}
}

// lockedBuffer is a buffer the wait writes while the test reads it.
type lockedBuffer struct {
	// mu protects buf.
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
