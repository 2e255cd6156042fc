package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// gapUser is the user whose events the gap tests follow.
const gapUser = "u-gap"

// TestSubscriptionFillsEventsLostAfterFanout drops fanned-out events on
// the way to a subscriber whose connection stays up — the server refuses
// the fan-out's publishes of one kind, as a cut route loses them, after
// the fan-out has acked them — and checks that the subscription notices
// and reads them back from the stream (events.since, as controld serves
// it): a lost event followed by another (its Prev was not delivered),
// then a lost last event (the quiet subscription's head check). Every
// event arrives once, in stream order. Without Prev and the head check
// the dropped events never arrive.
func TestSubscriptionFillsEventsLostAfterFanout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	// The fan-out may publish users' alloc.* events and nothing else: the
	// server drops its project.changed copies.
	f.bus.ServeCallout(t, func(c testutil.Credentials) (testutil.Grant, error) {
		if c.Token != "fanout" {
			return testutil.Grant{}, errors.New("unknown")
		}
		return testutil.Grant{Pub: []string{"gpuaas.user.*.evt.alloc.>"}}, nil
	})
	fanNC := testutil.Connect(t, f.bus.URL, nats.Token("fanout"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	runFanout(t, f.js, fanNC)
	serveSince(t, f.nc, f.js, gapUser)

	watcher := api.NewClient(f.bus.Connect(t))
	var (
		mu      sync.Mutex // protects refills
		refills []api.EventsRefill
	)
	events, err := watcher.SubscribeEvents(ctx, gapUser, api.OnRefill(func(r api.EventsRefill) {
		mu.Lock()
		defer mu.Unlock()
		refills = append(refills, r)
	}))
	if err != nil {
		t.Fatal(err)
	}

	// delivered, dropped, delivered: the third's Prev is the second.
	kinds := []string{api.EventAllocState, api.EventProject, api.EventAllocProgress}
	ids := make([]int64, 0, 4)
	for _, k := range kinds {
		ids = append(ids, f.enqueueKind(t, k))
	}
	f.publish(t, len(kinds))
	got := receive(t, events, 3)
	// Then a dropped last event: nothing follows it.
	ids = append(ids, f.enqueueKind(t, api.EventProject))
	f.publish(t, 1)
	published := time.Now()
	got = append(got, receive(t, events, 1)...)
	t.Logf("a lost last event was delivered %v after it was published (head check every %v)",
		time.Since(published).Round(time.Millisecond), api.EventsHeadPoll)

	for i, ev := range got {
		if ev.ID != ids[i] || ev.Seq != uint64(i+1) {
			t.Errorf("event %d is id %d seq %d; want id %d seq %d", i, ev.ID, ev.Seq, ids[i], i+1)
		}
	}
	select {
	case ev := <-events:
		t.Errorf("got a further event %d (%s); want each once", ev.ID, ev.Kind)
	case <-time.After(2 * api.EventsHeadPoll): // a repeat would follow a check at once
	}
	mu.Lock()
	defer mu.Unlock()
	want := []api.EventsRefill{{Cause: api.RefillChain, After: 1, Events: 2}, {Cause: api.RefillHead, After: 3, Events: 1}}
	if len(refills) != len(want) || refills[0] != want[0] || refills[1] != want[1] {
		t.Errorf("refills %+v; want %+v", refills, want)
	}
}

// TestFanoutChainsEachUsersEvents checks the Prev of each copy: the
// stream sequence of the same user's previous event, per user, the same
// again when an event is delivered twice.
func TestFanoutChainsEachUsersEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	sub, err := f.nc.SubscribeSync("gpuaas.user.*.evt.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	runFanout(t, f.js, f.nc)
	now := f.clock.Now()
	for _, users := range [][]string{{"u-a", "u-b"}, {"u-b"}, {"u-a"}} {
		if _, err := Enqueue(ctx, f.pool, now, Event{Kind: api.EventProject, Subject: "p-1", Users: users}); err != nil {
			t.Fatal(err)
		}
	}
	f.publish(t, 3)
	type cp struct {
		user      string
		seq, prev uint64
	}
	want := []cp{{"u-a", 1, 0}, {"u-b", 1, 0}, {"u-b", 2, 1}, {"u-a", 3, 1}}
	for i, w := range want {
		m, err := sub.NextMsg(15 * time.Second)
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		var ev api.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if got := (cp{m.Subject, ev.Seq, ev.Prev}); got != (cp{api.UserEventSubject(w.user, api.EventProject), w.seq, w.prev}) {
			t.Errorf("copy %d: %+v; want %+v", i, got, w)
		}
	}
	// A redelivery (the ack was lost) gets the same Prev again, and the
	// chain goes on from there.
	kv, err := f.js.KeyValue(ctx, HeadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		seq, want uint64
	}{{3, 1}, {2, 0}, {5, 3}} {
		if prev, err := advanceHead(ctx, kv, "u-a", c.seq); err != nil || prev != c.want {
			t.Errorf("advanceHead(u-a, %d) = %d, %v; want %d", c.seq, prev, err, c.want)
		}
	}
	if h, known, err := lookupHead(ctx, f.js, "u-a"); err != nil || !known || h != 5 {
		t.Errorf("lookupHead(u-a) = %d, %v, %v; want 5, true", h, known, err)
	}
}

// enqueueKind commits one event of kind for gapUser and returns its id.
func (f *fixture) enqueueKind(t testing.TB, kind string) int64 {
	t.Helper()
	id, err := Enqueue(t.Context(), f.pool, f.clock.Now(), Event{Kind: kind, Subject: "a-gap", Users: []string{gapUser}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// publish runs the relay once, which must publish n rows.
func (f *fixture) publish(t testing.TB, n int) {
	t.Helper()
	if got, err := f.relay(t, nil).RunOnce(t.Context()); err != nil || got != n {
		t.Fatalf("relay published %d rows, %v; want %d", got, err, n)
	}
}

// runFanout runs Fanout on nc until the test ends.
func runFanout(t testing.TB, js jetstream.JetStream, nc *nats.Conn) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Fanout(ctx, js, nc, testutil.Logger(t)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fanout: %v", err)
		}
	})
}

// serveSince answers events.since for user as controld's endpoint does
// (the handler decodes the request and calls Since).
func serveSince(t testing.TB, nc *nats.Conn, js jetstream.JetStream, user string) {
	t.Helper()
	sub, err := nc.Subscribe(api.Subject(api.EndpointEventsSince), func(m *nats.Msg) {
		var req api.EventsSinceRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			return
		}
		if req.Limit == 0 {
			req.Limit = api.MaxEventsSince
		}
		resp, err := Since(context.Background(), js, user, req)
		if err != nil {
			return // the client retries
		}
		b, _ := json.Marshal(resp)
		_ = m.Respond(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// receive reads n events, failing after a bounded wait.
func receive(t testing.TB, events <-chan api.Event, n int) []api.Event {
	t.Helper()
	var got []api.Event
	timeout := time.After(15 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("subscription ended after %d events", len(got))
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("got %d events %v; want %d more", len(got), got, n-len(got))
		}
	}
	return got
}
