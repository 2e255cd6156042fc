package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/lease"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestRelayPublishesEachRowOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	ids := f.enqueue(t, 5, "u-1", "u-2")
	r := f.relay(t, nil)

	n, err := r.RunOnce(ctx)
	if err != nil || n != 5 {
		t.Fatalf("first batch got %d rows, %v; want 5, nil", n, err)
	}
	msgs := f.streamMsgs(t)
	if len(msgs) != len(ids) {
		t.Fatalf("stream holds %d messages; want %d", len(msgs), len(ids))
	}
	for i, m := range msgs {
		if got, want := m.Header.Get("Nats-Msg-Id"), strconv.FormatInt(ids[i], 10); got != want {
			t.Errorf("message %d Nats-Msg-Id: got %q; want %q", i, got, want)
		}
		if got, want := m.Subject, api.EventSubject(api.EventAllocState); got != want {
			t.Errorf("message %d subject: got %q; want %q", i, got, want)
		}
		var ev api.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if ev.ID != ids[i] || ev.Kind != api.EventAllocState || ev.Subject != "a-"+strconv.Itoa(i) ||
			len(ev.Users) != 2 || string(ev.Data) != `{"n":`+strconv.Itoa(i)+`}` || !ev.At.Equal(f.clock.Now()) {
			t.Errorf("message %d got %+v (data %s); want event %d as enqueued", i, ev, ev.Data, ids[i])
		}
	}
	for _, id := range ids {
		if got := f.row(t, id); got.state != "published" || got.attempts != 1 || !got.published {
			t.Errorf("row %d got %+v; want published after 1 attempt", id, got)
		}
	}

	if n, err := r.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("second batch got %d rows, %v; want 0, nil", n, err)
	}
	f.wantEachOnce(t, ids)
}

func TestRelayLeavesUncommittedRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	id, err := Enqueue(ctx, tx, f.clock.Now(), Event{Kind: api.EventNode, Subject: "n-1"})
	if err != nil {
		t.Fatal(err)
	}
	r := f.relay(t, nil)
	if n, err := r.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("batch before commit got %d rows, %v; want 0, nil", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("batch after commit got %d rows, %v; want 1, nil", n, err)
	}
	f.wantEachOnce(t, []int64{id})
}

func TestRelayCrashBeforeMarkPublishesEachRowOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	ids := f.enqueue(t, 6)
	crash := errors.New("relay crashed")
	var published []int64
	crashing := f.relay(t, func(c *RelayConfig) {
		c.BatchSize = 4
		c.beforeMark = func(ok []int64) error {
			published = append(published, ok...)
			return crash
		}
	})
	if _, err := crashing.RunOnce(ctx); !errors.Is(err, crash) {
		t.Fatalf("crashing batch got %v; want %v", err, crash)
	}
	if len(published) != 4 {
		t.Fatalf("crashing relay published %v; want the first 4 rows", published)
	}
	if got := f.countState(t, "pending"); got != len(ids) {
		t.Fatalf("pending rows after the crash: got %d; want %d (none marked)", got, len(ids))
	}

	// A new relay republishes the crashed batch; JetStream drops the
	// repeats by Nats-Msg-Id.
	r := f.relay(t, func(c *RelayConfig) { c.BatchSize = 4 })
	for {
		n, err := r.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	f.wantEachOnce(t, ids)
	if got := f.countState(t, "published"); got != len(ids) {
		t.Fatalf("published rows: got %d; want %d", got, len(ids))
	}
}

func TestRelayBacksOffThenMovesRowToDead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	// With no stream, nothing is bound to the event subjects.
	if err := f.js.DeleteStream(ctx, api.EventStreamName); err != nil {
		t.Fatal(err)
	}
	doomed := f.enqueue(t, 1)[0]
	r := f.relay(t, func(c *RelayConfig) { c.MaxAttempts = 3 })

	steps := []struct {
		name         string
		advance      time.Duration
		wantClaimed  int
		wantState    string
		wantAttempts int
		wantBackoff  time.Duration // next_attempt_at after the step, from the clock
	}{
		{"first attempt fails", 0, 1, "pending", 1, 200 * time.Millisecond},
		{"not due while backing off", 0, 0, "pending", 1, 200 * time.Millisecond},
		{"still backing off", 150 * time.Millisecond, 0, "pending", 1, 50 * time.Millisecond},
		{"second attempt fails", 50 * time.Millisecond, 1, "pending", 2, 400 * time.Millisecond},
		{"backoff doubled", 300 * time.Millisecond, 0, "pending", 2, 100 * time.Millisecond},
		{"last attempt fails", 100 * time.Millisecond, 1, "dead", 3, 800 * time.Millisecond},
		{"dead rows are not retried", time.Hour, 0, "dead", 3, 800*time.Millisecond - time.Hour},
	}
	for _, st := range steps {
		f.clock.Advance(st.advance)
		n, err := r.RunOnce(ctx)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := f.row(t, doomed)
		if n != st.wantClaimed || got.state != st.wantState || got.attempts != st.wantAttempts {
			t.Fatalf("%s: got %d claimed, row %s after %d attempts; want %d, %s after %d",
				st.name, n, got.state, got.attempts, st.wantClaimed, st.wantState, st.wantAttempts)
		}
		if backoff := got.next.Sub(f.clock.Now()); backoff != st.wantBackoff {
			t.Fatalf("%s: next attempt in %v; want %v", st.name, backoff, st.wantBackoff)
		}
		if got.lastError == "" || got.published {
			t.Fatalf("%s: got last_error %q, published %v; want an error and not published", st.name, got.lastError, got.published)
		}
	}

	// Once the stream is back, a row that failed before goes through.
	late := f.enqueue(t, 1)[0]
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := EnsureStream(ctx, f.js, 1, 1<<30, 7*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	if n, err := r.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("batch after the stream came back got %d rows, %v; want 1 (the dead row stays dead)", n, err)
	}
	if got := f.row(t, late); got.state != "published" || got.attempts != 2 {
		t.Fatalf("retried row got %+v; want published after 2 attempts", got)
	}
	f.wantEachOnce(t, []int64{late})
}

// TestRelaysShareOneLease: relays run under the relay's lease (as
// controld runs them) publish from one replica at a time, and the standby
// takes over when the active one stops.
func TestRelaysShareOneLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// mu protects published: relay name -> ids it published.
	var mu sync.Mutex
	published := map[string][]int64{}
	type running struct {
		cancel context.CancelFunc
		done   chan error
	}
	relays := map[string]running{}
	for _, name := range []string{"a", "b"} {
		pool := f.openPool(t) // a replica of its own
		r := f.relay(t, func(c *RelayConfig) {
			c.Pool, c.BatchSize, c.PollInterval = pool, 3, 20*time.Millisecond
			c.beforeMark = func(ok []int64) error {
				mu.Lock()
				defer mu.Unlock()
				published[name] = append(published[name], ok...)
				return nil
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		k := &lease.Keeper{Pool: pool, Holder: name, TTL: 3 * time.Second}
		go func() { done <- k.Run(ctx, lease.OutboxRelay, r.Run) }()
		relays[name] = running{cancel, done}
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("relay %s: %v", name, err)
			}
		})
	}
	snapshot := func() map[string][]int64 {
		mu.Lock()
		defer mu.Unlock()
		out := map[string][]int64{}
		for k, v := range published {
			out[k] = append([]int64(nil), v...)
		}
		return out
	}
	allPublished := func() bool { return f.countState(t, "pending") == 0 }

	ids := f.enqueue(t, 10)
	testutil.EventuallyWithin(t, 15*time.Second, "the first rows to be published", allPublished)
	got := snapshot()
	if len(got) != 1 {
		t.Fatalf("relays that published: got %v; want exactly one (the lease holder)", got)
	}
	var active, standby string
	for name := range got {
		active = name
	}
	standby = map[string]string{"a": "b", "b": "a"}[active]
	if len(got[active]) != len(ids) {
		t.Fatalf("relay %s published %v; want each of %v once", active, got[active], ids)
	}

	// The active relay stops; the standby takes the lease over.
	relays[active].cancel()
	if err := <-relays[active].done; err != nil {
		t.Fatalf("relay %s: %v", active, err)
	}
	relays[active].done <- nil // for its cleanup
	more := f.enqueue(t, 4)
	testutil.EventuallyWithin(t, 15*time.Second, "the standby relay to publish", allPublished)
	got = snapshot()
	if len(got[standby]) != len(more) || len(got[active]) != len(ids) {
		t.Fatalf("after failover %s published %v and %s %v; want %s to publish %v", active, got[active], standby, got[standby], standby, more)
	}
	f.wantEachOnce(t, append(ids, more...))
}

// Regression: Enqueue left next_attempt_at to the database's now(), so a
// relay whose injected clock was behind the database never found a row due.
func TestRelayDueTimeFollowsInjectedClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // the clock is in 2020
	ids := f.enqueue(t, 1)
	if n, err := f.relay(t, nil).RunOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("batch got %d rows, %v; want 1, nil", n, err)
	}
	if got := f.row(t, ids[0]); !got.next.Equal(f.clock.Now()) {
		t.Fatalf("next_attempt_at got %v; want the enqueue time %v", got.next, f.clock.Now())
	}
}

// TestRelayFailsEveryUnackedRowAfterAckTimeout is the regression test of
// the relay that stopped for good when a NATS server stopped under load
// (e2e TestFaultNATSNodeLossUnderLoad: the stream kept 65 of the user's
// events, 175 rows stayed pending): the EVENTS stream's leader went away
// with publishes of several rows in flight, no ack came for them, and the
// batch's one timeout value went to the first; the others waited for ever,
// and so did every later row. Here the subjects' only listener is a plain
// subscriber, which never acks: every row of the batch must be failed
// after AckTimeout and the relay go on, its JetStream client (NewJetStream)
// holding none of them.
func TestRelayFailsEveryUnackedRowAfterAckTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	if err := f.js.DeleteStream(ctx, api.EventStreamName); err != nil {
		t.Fatal(err)
	}
	sink := f.bus.Connect(t)
	if _, err := sink.Subscribe(api.EventSubjectPrefix+".>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	ids := f.enqueue(t, 3) // three subjects: one wave of three publishes
	// The fixture's client has no timeout of its own: the relay's counts.
	r := f.relay(t, func(c *RelayConfig) { c.AckTimeout = 200 * time.Millisecond })
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := r.RunOnce(ctx)
		done <- result{n, err}
	}()
	var got result
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("RunOnce still waiting for acks 30s on, with a 200ms AckTimeout")
	}
	if got.err != nil || got.n != len(ids) {
		t.Fatalf("RunOnce: got %d rows, %v; want %d", got.n, got.err, len(ids))
	}
	for _, id := range ids {
		if row := f.row(t, id); row.state != "pending" || row.attempts != 1 || !strings.Contains(row.lastError, "no ack") {
			t.Errorf("row %d: got %+v; want pending after 1 attempt, failed for want of an ack", id, row)
		}
	}

	// Nor may such publishes stay in flight in the relay's client
	// (NewJetStream), whose limit of them would stop every later publish.
	js, err := NewJetStream(f.nc, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	fut, err := js.PublishMsgAsync(&nats.Msg{Subject: api.EventSubject(api.EventAllocState), Data: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-fut.Err():
	case <-fut.Ok():
		t.Fatal("acked with no stream")
	case <-time.After(30 * time.Second):
		t.Fatal("an unacknowledged publish still in flight 30s on, with a 200ms timeout")
	}
	if n := js.PublishAsyncPending(); n != 0 {
		t.Fatalf("got %d publishes in flight after their timeout; want 0", n)
	}
}
