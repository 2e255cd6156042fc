package outbox

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestRelayHoldsSubjectBehindBackingOffRow: an allocation's event whose
// publish failed is not overtaken by the allocation's later events while
// it backs off; other subjects' events go out meanwhile.
func TestRelayHoldsSubjectBehindBackingOffRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	if err := f.js.DeleteStream(ctx, api.EventStreamName); err != nil {
		t.Fatal(err)
	}
	enq := func(subject string) int64 {
		id, err := Enqueue(ctx, f.pool, f.clock.Now(), Event{Kind: api.EventAllocProgress, Subject: subject})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := enq("a-held")
	r := f.relay(t, nil)
	if n, err := r.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("first batch got %d rows, %v; want 1 (failing)", n, err)
	}
	if err := EnsureStream(ctx, f.js, 1, 1<<30, 7*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	second, other := enq("a-held"), enq("a-other")
	if n, err := r.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("batch while %d backs off got %d rows, %v; want 1 (only the other subject's)", first, n, err)
	}
	if got := f.row(t, second); got.state != "pending" || got.attempts != 0 {
		t.Fatalf("row behind the failed one: got %+v; want pending, never tried", got)
	}
	f.clock.Advance(time.Second)
	if n, err := r.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("batch after the backoff got %d rows, %v; want 2", n, err)
	}
	var order []string
	for _, m := range f.streamMsgs(t) {
		order = append(order, m.Header.Get(jetstream.MsgIDHeader))
	}
	want := []string{strconv.FormatInt(other, 10), strconv.FormatInt(first, 10), strconv.FormatInt(second, 10)}
	if len(order) != len(want) {
		t.Fatalf("stream holds %v; want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("stream holds %v; want %v", order, want)
		}
	}
}

// TestFanoutKeepsStreamOrderAcrossReplicas: with two controld replicas
// fanning out at once, a user gets an allocation's events in the order of
// the stream (two showed "done" before "started" when replicas raced).
func TestFanoutKeepsStreamOrderAcrossReplicas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	const n = 300
	ids := make([]int64, 0, n)
	for range n {
		id, err := Enqueue(ctx, f.pool, f.clock.Now(), Event{Kind: api.EventAllocProgress, Subject: "a-1", Users: []string{"u-alice"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	watcher := f.bus.Connect(t)
	got := make(chan *nats.Msg, n)
	if _, err := watcher.ChanSubscribe(api.UserEventWildcard("u-alice"), got); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for range 2 { // two replicas, each on its own connection
		nc := f.bus.Connect(t)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- Fanout(fctx, js, nc, testutil.Logger(t)) }()
	}
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("fanout: %v", err)
			}
		}
	})
	// The replicas are consuming while the relay publishes, a few events
	// at a time, as in production.
	r := f.relay(t, func(c *RelayConfig) { c.BatchSize = 10 })
	for sent := 0; sent < n; {
		got, err := r.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sent += got
	}
	timeout := time.After(30 * time.Second)
	for i, want := range ids {
		select {
		case m := <-got:
			var ev api.Event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.ID != want {
				t.Fatalf("delivery %d got event %d; want %d (stream order)", i, ev.ID, want)
			}
		case <-timeout:
			t.Fatalf("delivery %d: timed out waiting for event %d", i, want)
		}
	}
}
