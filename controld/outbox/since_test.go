package outbox

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestSinceReturnsOnlyTheCallersEvents: events.since reads the stream for
// one user: their events after the sequence asked, in order, with their
// stream sequences; another user's events and events for no one are
// skipped but counted in Next.
func TestSinceReturnsOnlyTheCallersEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	now := f.clock.Now()
	var alice []int64
	for i, users := range [][]string{{"u-alice"}, {"u-bob"}, nil, {"u-bob", "u-alice"}, {"u-bob"}} {
		id, err := Enqueue(ctx, f.pool, now, Event{Kind: api.EventAllocState, Subject: "a-" + string(rune('1'+i)), Users: users})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(users, "u-alice") {
			alice = append(alice, id)
		}
	}
	if n, err := f.relay(t, nil).RunOnce(ctx); err != nil || n != 5 {
		t.Fatalf("relay got %d rows, %v; want 5, nil", n, err)
	}

	tail, err := Since(ctx, f.js, "u-alice", api.EventsSinceRequest{Tail: true})
	if err != nil || tail.Next != 5 || len(tail.Events) != 0 {
		t.Fatalf("tail got %+v, %v; want next 5, no events", tail, err)
	}
	tests := []struct {
		name     string
		after    uint64
		wantIDs  []int64
		wantSeqs []uint64
	}{
		{"from the start", 0, alice, []uint64{1, 4}},
		{"after the first", 1, alice[1:], []uint64{4}},
		{"after the last of hers", 4, nil, nil},
		{"at the end", 5, nil, nil},
		{"beyond the end", 9, nil, nil},
	}
	for _, tt := range tests {
		got, err := Since(ctx, f.js, "u-alice", api.EventsSinceRequest{After: tt.after, Limit: 10})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var ids []int64
		var seqs []uint64
		for _, ev := range got.Events {
			ids, seqs = append(ids, ev.ID), append(seqs, ev.Seq)
		}
		if !slices.Equal(ids, tt.wantIDs) || !slices.Equal(seqs, tt.wantSeqs) || got.More || got.Missed != 0 || got.Next != max(5, tt.after) {
			t.Errorf("%s: got ids %v seqs %v next %d more %v missed %d; want ids %v seqs %v next %d",
				tt.name, ids, seqs, got.Next, got.More, got.Missed, tt.wantIDs, tt.wantSeqs, max(5, tt.after))
		}
	}
	// Limit stops early and says there is more.
	got, err := Since(ctx, f.js, "u-alice", api.EventsSinceRequest{After: 0, Limit: 1})
	if err != nil || len(got.Events) != 1 || !got.More || got.Next != 1 {
		t.Fatalf("limit 1 got %+v, %v; want one event, more, next 1", got, err)
	}
}

// TestSinceReportsEventsDroppedByRetention is the gap case: asked after a
// sequence the stream no longer holds, Since says how many sequences were
// lost and returns what is left.
func TestSinceReportsEventsDroppedByRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	now := f.clock.Now()
	for range 4 {
		if _, err := Enqueue(ctx, f.pool, now, Event{Kind: api.EventAllocState, Subject: "a-1", Users: []string{"u-alice"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := f.relay(t, nil).RunOnce(ctx); err != nil || n != 4 {
		t.Fatalf("relay got %d rows, %v; want 4, nil", n, err)
	}
	stream, err := f.js.Stream(ctx, api.EventStreamName)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSequence(4)); err != nil { // keeps #4 only
		t.Fatal(err)
	}
	got, err := Since(ctx, f.js, "u-alice", api.EventsSinceRequest{After: 1, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got.Missed != 2 || got.First != 4 || len(got.Events) != 1 || got.Events[0].Seq != 4 || got.Next != 4 {
		t.Fatalf("got %+v; want missed 2 (#2, #3), first 4, one event #4, next 4", got)
	}
	// Asked after what it still holds: no gap.
	if got, err := Since(ctx, f.js, "u-alice", api.EventsSinceRequest{After: 3, Limit: 10}); err != nil || got.Missed != 0 || len(got.Events) != 1 {
		t.Fatalf("after 3 got %+v, %v; want no gap, one event", got, err)
	}
}

// TestEventsSinceDuringStreamOutageIsUnavailable: while JetStream does not
// answer (its server lost; in a cluster, while the EVENTS leader is being
// elected) events.since answered `internal`, which clients do not retry
// (the fault test's final read failed so). It is `unavailable` now.
func TestEventsSinceDuringStreamOutageIsUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.bus.Stop()
	for _, req := range []api.EventsSinceRequest{{Tail: true}, {After: 0, Limit: 10}} {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err := Since(ctx, f.js, "u-alice", req)
		cancel()
		if !errors.Is(err, api.ErrUnavailable) {
			t.Fatalf("%+v: got %v; want unavailable", req, err)
		}
	}
}
