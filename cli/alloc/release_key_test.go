package alloc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestReleaseIdempotencyKey: `alloc release --idempotency-key K` twice
// gets the same reply both times, and the allocation is released once (one
// audit row, one release task); another key is a new request, refused
// with conflict.
func TestReleaseIdempotencyKey(t *testing.T) {
	t.Parallel()
	env, client := waitEnv(t)
	ctx := context.Background()
	a, err := client.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	release := func(key string) (string, error) {
		ios, _, out, _ := cmdtest.Streams(false)
		cmd := NewCmdRelease(&cmdutil.Factory{IOStreams: ios, Client: func() (*api.Client, error) { return client, nil },
			Now: time.Now}, nil)
		err := cmdtest.Execute(cmd, a.ID, "--yes", "--idempotency-key", key, "--json", "id,state,version,reason")
		return out.String(), err
	}
	first, err := release("release-1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first, `"state":"releasing"`) {
		t.Fatalf("first release printed %q; want the allocation releasing", first)
	}
	again, err := release("release-1")
	if err != nil {
		t.Fatalf("retry with the same key: %v", err)
	}
	if again != first {
		t.Errorf("retry printed %q; want the first reply %q", again, first)
	}
	if _, err := release("release-2"); !errors.Is(err, api.ErrConflict) {
		t.Errorf("release with another key got %v; want conflict", err)
	}
	for _, c := range []struct{ what, sql string }{
		{"release audit rows", `SELECT count(*) FROM audit_logs WHERE target_id = $1 AND action = 'alloc.release'`},
		{"release tasks", `SELECT count(*) FROM node_tasks WHERE allocation_id = $1 AND type = 'slice.vm_release'`},
		{"transitions to releasing", `SELECT count(*) FROM allocation_transitions WHERE allocation_id = $1 AND to_state = 'releasing'`},
	} {
		var n int
		if err := env.Server.Pool().QueryRow(ctx, c.sql, a.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%s got %d; want 1", c.what, n)
		}
	}
}

// TestReleaseTimeoutNamesItsKey: when controld does not answer a release
// in time, the hint to retry with the same key names that key, the one the
// request was sent with, so the advice can be followed.
func TestReleaseTimeoutNamesItsKey(t *testing.T) {
	t.Parallel()
	b := testutil.PlainNATS(t)
	nc := testutil.Connect(t, b.URL)
	keys := make(chan string, 1)
	// A controld that takes the request and never answers.
	if _, err := nc.Subscribe(api.Subject(api.EndpointAllocRelease), func(m *nats.Msg) {
		keys <- m.Header.Get(api.HeaderIdempotencyKey)
	}); err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(nc, api.WithTimeout(200*time.Millisecond))
	tests := []struct {
		name string
		key  string // given with --idempotency-key; "" for none
	}{
		{name: "given key", key: "k-given"},
		{name: "generated key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			err := releaseRun(context.Background(), &ReleaseOptions{IO: ios, ID: "a-1", Yes: true, IdempotencyKey: tt.key,
				Client: func() (*api.Client, error) { return client, nil }})
			sent := <-keys
			if tt.key != "" && sent != tt.key {
				t.Fatalf("sent key %q; want %q", sent, tt.key)
			}
			var e *api.Error
			if !errors.As(err, &e) || e.Code != api.CodeUnavailable {
				t.Fatalf("got %v; want unavailable", err)
			}
			if want := "--idempotency-key " + sent; sent == "" || !strings.Contains(e.Hint, want) {
				t.Errorf("got hint %q; want it to contain %q", e.Hint, want)
			}
		})
	}
}
