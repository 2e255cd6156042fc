package outbox

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestFanoutDeliversToListedUsersOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()

	// One subscriber (controld's own identity: no user may) sees every
	// user's events, in the order Fanout sends them.
	watcher := f.bus.Connect(t)
	got := make(chan *nats.Msg, 64)
	if _, err := watcher.ChanSubscribe("gpuaas.user.*.evt.>", got); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Fanout(fctx, f.js, f.nc, testutil.Logger(t)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fanout: %v", err)
		}
	})

	now := f.clock.Now()
	alice, err := Enqueue(ctx, f.pool, now, Event{Kind: api.EventAllocState, Subject: "a-1", Users: []string{"u-alice", "u-bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(ctx, f.pool, now, Event{Kind: api.EventNode, Subject: "n-1"}); err != nil { // for no one
		t.Fatal(err)
	}
	last, err := Enqueue(ctx, f.pool, now, Event{Kind: api.EventProject, Subject: "p-1", Users: []string{"u-bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.relay(t, nil).RunOnce(ctx); err != nil || n != 3 {
		t.Fatalf("relay got %d rows, %v; want 3, nil", n, err)
	}

	want := []struct {
		subject string
		id      int64
		seq     uint64 // in the EVENTS stream, for clients to resume from
	}{
		{api.UserEventSubject("u-alice", api.EventAllocState), alice, 1},
		{api.UserEventSubject("u-bob", api.EventAllocState), alice, 1},
		{api.UserEventSubject("u-bob", api.EventProject), last, 3},
	}
	timeout := time.After(15 * time.Second)
	for i, w := range want {
		select {
		case m := <-got:
			var ev api.Event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			if m.Subject != w.subject || ev.ID != w.id || ev.Seq != w.seq {
				t.Fatalf("delivery %d got event %d (seq %d) on %s; want event %d (seq %d) on %s", i, ev.ID, ev.Seq, m.Subject, w.id, w.seq, w.subject)
			}
		case <-timeout:
			t.Fatalf("delivery %d: timed out waiting for event %d on %s", i, w.id, w.subject)
		}
	}
	// The last event was fanned out after the one for no one, so anything
	// sent for that one would have arrived by now.
	select {
	case m := <-got:
		t.Fatalf("extra delivery on %s: %s", m.Subject, m.Data)
	default:
	}
}

// TestFanoutTellsGatewaysOfRevocations: a session.revoked event reaches the
// gateways' subject, as its SessionRevoked body, besides the user's own
// subject; no other event goes there.
func TestFanoutTellsGatewaysOfRevocations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	watcher := f.bus.Connect(t)
	gate := make(chan *nats.Msg, 8)
	if _, err := watcher.ChanSubscribe(gateproto.GateRevokedSubject, gate); err != nil {
		t.Fatal(err)
	}
	user := make(chan *nats.Msg, 8)
	if _, err := watcher.ChanSubscribe("gpuaas.user.u-alice.evt.>", user); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Fanout(fctx, f.js, f.nc, testutil.Logger(t)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fanout: %v", err)
		}
	})

	now := f.clock.Now()
	want := api.SessionRevoked{UserID: "u-alice", SessionIDs: []string{"s-1", "s-2"}, Reason: "disabled"}
	for _, ev := range []Event{
		{Kind: api.EventAllocState, Subject: "a-1", Users: []string{"u-alice"}},
		{Kind: api.EventSessionRevoked, Subject: "s-1", Users: []string{"u-alice"}, Payload: want},
		{Kind: api.EventSessionRevoked, Subject: "s-3", Payload: map[string]any{}}, // names nothing: not sent
	} {
		if _, err := Enqueue(ctx, f.pool, now, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := f.relay(t, nil).RunOnce(ctx); err != nil || n != 3 {
		t.Fatalf("relay got %d rows, %v; want 3, nil", n, err)
	}
	timeout := time.After(15 * time.Second)
	for _, kind := range []string{api.EventAllocState, api.EventSessionRevoked} {
		select {
		case m := <-user:
			if m.Subject != api.UserEventSubject("u-alice", kind) {
				t.Fatalf("user got %s; want %s", m.Subject, kind)
			}
		case <-timeout:
			t.Fatalf("timed out waiting for the user's %s event", kind)
		}
	}
	select {
	case m := <-gate:
		var got api.SessionRevoked
		if err := json.Unmarshal(m.Data, &got); err != nil {
			t.Fatal(err)
		}
		if got.UserID != want.UserID || got.Reason != want.Reason || len(got.SessionIDs) != 2 || got.SessionIDs[1] != "s-2" {
			t.Fatalf("gateways got %+v; want %+v", got, want)
		}
	case <-timeout:
		t.Fatal("timed out waiting for the revocation on the gateways' subject")
	}
	// Everything is acked once the gateways have it: nothing redelivered,
	// and the payload naming no sessions was not sent.
	testutil.EventuallyWithin(t, 15*time.Second, "every event acked", func() bool {
		c, err := f.js.Consumer(ctx, api.EventStreamName, fanoutConsumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.Delivered.Stream == 3
	})
	select {
	case m := <-gate:
		t.Fatalf("extra message to the gateways: %s", m.Data)
	default:
	}
}
