package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
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

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// lockedBuffer is an output the watch writes while the test reads it.
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

func TestNewCmdWatch(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantAlloc string
		wantJSON  bool
		wantErr   bool
	}{
		{name: "everything", args: nil},
		{name: "one allocation as json", args: []string{"--alloc", "a-1", "--json"}, wantAlloc: "a-1", wantJSON: true},
		{name: "jq implies json", args: []string{"--jq", ".kind"}, wantJSON: true},
		{name: "unknown field", args: []string{"--json", "nope"}, wantErr: true},
		{name: "argument", args: []string{"a-1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *Options
			cmd := NewCmdWatch(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
			err := cmdtest.Execute(cmd, tt.args...)
			if tt.wantErr {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) {
					t.Fatalf("got %v; want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Alloc != tt.wantAlloc || (got.Exporter != nil) != tt.wantJSON {
				t.Errorf("got alloc %q json %v; want %q %v", got.Alloc, got.Exporter != nil, tt.wantAlloc, tt.wantJSON)
			}
		})
	}
}

// watching is a watch running in the background against a real controld.
type watching struct {
	out, errOut *lockedBuffer
	cancel      context.CancelFunc
	done        chan error
}

// startWatch runs `gpuaas watch args...` and returns once it listens.
func startWatch(t *testing.T, env *controldtest.Env, args ...string) *watching {
	t.Helper()
	return startWatchWith(t, env.UserClient(t, env.Admin.ID, env.AdminToken), args...)
}

// startWatchWith is startWatch with the client the watch uses.
func startWatchWith(t *testing.T, client *api.Client, args ...string) *watching {
	t.Helper()
	ios, _, _, _ := cmdutil.Test()
	w := &watching{out: &lockedBuffer{}, errOut: &lockedBuffer{}, done: make(chan error, 1)}
	ios.Out, ios.ErrOut = w.out, w.errOut
	ios.SetStderrTTY(true) // for the "Watching" line that says it listens
	f := &cmdutil.Factory{IOStreams: ios, Client: func() (*api.Client, error) { return client, nil }}
	cmd := NewCmdWatch(f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	cmd.SetContext(ctx)
	go func() { w.done <- cmdtest.Execute(cmd, args...) }()
	t.Cleanup(func() { cancel(); <-w.done })
	testutil.EventuallyWithin(t, 20*time.Second, "the watch to listen", func() bool { return strings.HasPrefix(w.errOut.String(), "Watching events of ") })
	return w
}

// queuedThenReleased makes two alloc.state events for a new allocation:
// requested (queued: the test fleet has no H100 slice host), then
// released.
func queuedThenReleased(t *testing.T, c *api.Client) string {
	t.Helper()
	ctx := context.Background()
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1, Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

func TestWatchJSON(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	w := startWatch(t, env, "--json")
	id := queuedThenReleased(t, c)
	testutil.EventuallyWithin(t, 20*time.Second, "the release", func() bool { return strings.Contains(w.out.String(), `"to":"released"`) })

	// The stream may hold older events too (the test's own login).
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(w.out.String(), "\n"), "\n") {
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q is not one JSON event: %v", line, err)
		}
		if ev.Subject != id {
			continue
		}
		var change api.AllocStateChange
		if err := json.Unmarshal(ev.Data, &change); err != nil || ev.Kind != api.EventAllocState {
			t.Fatalf("got %s; want an alloc.state event", line)
		}
		got = append(got, change.From+">"+change.To)
	}
	if want := "requested>requested,requested>released"; strings.Join(got, ",") != want {
		t.Errorf("got changes %v; want %s", got, want)
	}

	w.cancel()
	if err := <-w.done; cmdutil.ExitCodeOf(err) != cmdutil.ExitInterrupted {
		t.Errorf("interrupted watch returned %v (exit %d); want exit 130", err, cmdutil.ExitCodeOf(err))
	}
	w.done <- nil // for the cleanup
}

func TestWatchOneAllocationPiped(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	// The queued event is fanned out before the watch starts (the outbox
	// relay may be slower than the watch's start under load): the watch
	// then sees only the release.
	sctx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	delivered, err := env.UserClient(t, env.Admin.ID, env.AdminToken).SubscribeEvents(sctx, env.Admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1, Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range delivered {
		if ev.Subject == a.ID {
			break
		}
	}
	w := startWatch(t, env, "--alloc", a.ID)
	other := queuedThenReleased(t, c) // events of another allocation: left out
	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 20*time.Second, "the release", func() bool { return strings.Contains(w.out.String(), "released") })
	fields := strings.Split(strings.TrimSuffix(w.out.String(), "\n"), "\t")
	if len(fields) != 4 || fields[1] != a.ID || fields[2] != api.EventAllocState || fields[3] != "requested → released (withdrawn before placement)" {
		t.Errorf("got %q; want one tab-separated line: time, %s, alloc.state, requested → released", w.out.String(), a.ID)
	}
	if _, err := time.Parse(time.RFC3339, fields[0]); err != nil {
		t.Errorf("time %q: %v", fields[0], err)
	}
	if strings.Contains(w.out.String(), other) {
		t.Errorf("got events of %s with --alloc %s", other, a.ID)
	}
}

func TestWatchUnknownAllocation(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	ios, _, _, _ := cmdutil.Test()
	client := env.Client(env.AdminToken)
	err := watchRun(context.Background(), &Options{IO: ios, Alloc: "a-nothere",
		Client: func() (*api.Client, error) { return client, nil }})
	if !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("got %v; want not_found", err)
	}
}

func TestDescribe(t *testing.T) {
	data := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	tests := []struct {
		name string
		ev   api.Event
		want string
	}{
		{"state", api.Event{Kind: api.EventAllocState, Data: data(api.AllocStateChange{From: "provisioning", To: "failed", Reason: "readiness: injected failure"})},
			"provisioning → failed (readiness: injected failure)"},
		{"phase done", api.Event{Kind: api.EventAllocProgress, Data: data(api.AllocProgress{Phase: "define_start", Status: api.PhaseDone, ElapsedMS: 812})},
			"define_start done 812ms"},
		{"phase started", api.Event{Kind: api.EventAllocProgress, Data: data(api.AllocProgress{Phase: "lease", Status: api.PhaseStarted})},
			"lease started"},
		{"other kind", api.Event{Kind: api.EventProject, Data: data(map[string]string{"member": "u-2"})}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(tt.ev); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}
