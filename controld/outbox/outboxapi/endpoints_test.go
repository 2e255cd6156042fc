package outboxapi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/outbox/outboxapi"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("outboxapi")

// now is years behind the wall clock, so that the database's now() and
// the injected clock never agree by chance.
var now = time.Date(2020, 3, 1, 12, 0, 0, 0, time.UTC)

type served struct {
	pool *pgxpool.Pool
	run  *mutate.Runner
	defs []endpoint.Def
	js   jetstream.JetStream
}

// serve is the endpoints over a fresh database; withStream adds a NATS
// server with the EVENTS stream for events.since.
func serve(t *testing.T, withStream bool) *served {
	t.Helper()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := &served{pool: pool, run: &mutate.Runner{Pool: pool, Now: func() time.Time { return now }}}
	if withStream {
		if s.js, err = jetstream.New(testutil.NATS(t).Connect(t)); err != nil {
			t.Fatal(err)
		}
		if err := outbox.EnsureStream(ctx, s.js, 1, 1<<30, 7*24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	s.defs = outboxapi.Endpoints(outboxapi.Deps{DB: pool, JS: s.js, Now: func() time.Time { return now }})
	return s
}

var operator = &endpoint.Request{Principal: &identity.Principal{UserID: "u-op", Role: api.RoleOperator}}

// event enqueues an event for users and leaves it in state, with
// attempts and lastError as the relay would have left them.
func (s *served) event(t *testing.T, state string, attempts int, lastError string, users ...string) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := outbox.Enqueue(ctx, s.pool, now, outbox.Event{Kind: api.EventAllocState, Subject: "a-1", Users: users})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE outbox_events SET state = $2, attempts = $3, last_error = $4,
		next_attempt_at = $5 WHERE id = $1`, id, state, attempts, lastError, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return id
}

// snapshot is every outbox row's delivery state and the counts of audit
// rows and idempotency records.
func (s *served) snapshot(t *testing.T) string {
	t.Helper()
	var out string
	err := s.pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(id || ':' || state || ':' || attempts || ':' ||
		next_attempt_at, ',' ORDER BY id), '') || '|' || (SELECT count(*) FROM audit_logs) || '|' ||
		(SELECT count(*) FROM idempotency_keys) FROM outbox_events`).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRetryOfAnEventNotDeadIsRefused: outbox.retry and outbox.drop
// change dead events only: a published, pending or dropped event is a
// conflict, an unknown id not_found, a non-positive id invalid_argument,
// and none of them changes a row or writes an audit row.
func TestRetryOfAnEventNotDeadIsRefused(t *testing.T) {
	ctx := context.Background()
	s := serve(t, false)
	published := s.event(t, api.OutboxPublished, 1, "")
	pending := s.event(t, api.OutboxPending, 2, "nats: timeout")
	dropped := s.event(t, api.OutboxDropped, 20, "stream gone")
	before := s.snapshot(t)
	for _, name := range []string{api.EndpointOutboxRetry, api.EndpointOutboxDrop} {
		d := endpointtest.Find(t, s.defs, name)
		for _, tt := range []struct {
			id   int64
			want error
		}{{published, api.ErrConflict}, {pending, api.ErrConflict}, {dropped, api.ErrConflict},
			{dropped + 100, api.ErrNotFound}, {0, api.ErrInvalidArgument}, {-1, api.ErrInvalidArgument}} {
			if _, err := endpointtest.Mutate[api.OutboxEvent](ctx, s.run, d, operator, api.OutboxRef{ID: tt.id}); !errors.Is(err, tt.want) {
				t.Errorf("%s of %d: got %v; want %v", name, tt.id, err, tt.want)
			}
		}
	}
	if after := s.snapshot(t); after != before {
		t.Fatalf("after refused retries and drops:\n%s\nwant\n%s", after, before)
	}
}

// TestRetryAndDropOfDeadEvents: a retried dead event is pending again,
// due at once by the injected clock with its attempts reset; a dropped
// one stays, as dropped; each is audited with the row it left (the
// relay's last error kept), and neither emits an event of its own.
func TestRetryAndDropOfDeadEvents(t *testing.T) {
	ctx := context.Background()
	s := serve(t, false)
	retried, dropped := s.event(t, api.OutboxDead, 20, "stream gone"), s.event(t, api.OutboxDead, 7, "no responders")
	got, err := endpointtest.Mutate[api.OutboxEvent](ctx, s.run, endpointtest.Find(t, s.defs, api.EndpointOutboxRetry), operator, api.OutboxRef{ID: retried})
	if err != nil || got.State != api.OutboxPending || got.Attempts != 0 || !got.NextAttemptAt.Equal(now) {
		t.Fatalf("retry: %+v, %v; want pending, no attempts, due at %s", got, err, now)
	}
	got, err = endpointtest.Mutate[api.OutboxEvent](ctx, s.run, endpointtest.Find(t, s.defs, api.EndpointOutboxDrop), operator, api.OutboxRef{ID: dropped})
	if err != nil || got.State != api.OutboxDropped {
		t.Fatalf("drop: %+v, %v; want dropped", got, err)
	}
	for _, tt := range []struct {
		action   string
		id       int64
		attempts int
		lastErr  string
	}{
		// The retry's row is audited as it left it: attempts reset, the
		// last error kept.
		{"outbox.retry", retried, 0, "stream gone"},
		{"outbox.drop", dropped, 7, "no responders"},
	} {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_type = 'outbox_event'
			AND target_id = $2 AND (detail->>'attempts')::int = $3 AND detail->>'last_error' = $4 AND actor_id = 'u-op'`,
			tt.action, fmt.Sprint(tt.id), tt.attempts, tt.lastErr).Scan(&n); err != nil || n != 1 {
			t.Errorf("%s of %d audited %d times, %v; want once with attempts %d and %q", tt.action, tt.id, n, err, tt.attempts, tt.lastErr)
		}
	}
	var events int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM outbox_events`).Scan(&events); err != nil || events != 2 {
		t.Fatalf("outbox rows: %d, %v; want the two events, no new one", events, err)
	}
}

// TestListBounds: ops.outbox_list lists dead events by default, refuses
// an unknown state and a limit out of [1, MaxListLimit], and honours the
// limit.
func TestListBounds(t *testing.T) {
	ctx := context.Background()
	s := serve(t, false)
	dead := []int64{s.event(t, api.OutboxDead, 20, "x"), s.event(t, api.OutboxDead, 20, "y")}
	s.event(t, api.OutboxPublished, 1, "")
	list := endpointtest.Find(t, s.defs, api.EndpointOutboxList)
	got, err := endpointtest.Read[api.OutboxListResponse](ctx, list, operator, api.OutboxListRequest{})
	if err != nil || len(got.Events) != 2 || got.Events[0].ID != dead[0] || got.Events[1].ID != dead[1] {
		t.Fatalf("list: %+v, %v; want the two dead events in order", got, err)
	}
	if got, err = endpointtest.Read[api.OutboxListResponse](ctx, list, operator, api.OutboxListRequest{Limit: 1}); err != nil || len(got.Events) != 1 {
		t.Fatalf("list with limit 1: %+v, %v", got, err)
	}
	for _, req := range []api.OutboxListRequest{{State: "gone"}, {Limit: -1}, {Limit: outboxapi.MaxListLimit + 1}} {
		if _, err := endpointtest.Read[api.OutboxListResponse](ctx, list, operator, req); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("list %+v: got %v; want invalid_argument", req, err)
		}
	}
}

// TestEventsSinceReadsTheCallersEvents: events.since answers the caller
// with their own events from the stream, at most limit of them, and
// refuses a limit out of [1, api.MaxEventsSince].
func TestEventsSinceReadsTheCallersEvents(t *testing.T) {
	ctx := context.Background()
	s := serve(t, true)
	var alice []int64
	for i, users := range [][]string{{"u-alice"}, {"u-bob"}, {"u-alice", "u-bob"}, {"u-alice"}} {
		id, err := outbox.Enqueue(ctx, s.pool, now, outbox.Event{Kind: api.EventAllocState, Subject: fmt.Sprint("a-", i), Users: users})
		if err != nil {
			t.Fatal(err)
		}
		if users[0] == "u-alice" {
			alice = append(alice, id)
		}
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Pool: s.pool, JS: s.js, Now: func() time.Time { return now }, Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(ctx); err != nil || n != 4 {
		t.Fatalf("relay: %d, %v; want 4", n, err)
	}
	since := endpointtest.Find(t, s.defs, api.EndpointEventsSince)
	as := &endpoint.Request{Principal: &identity.Principal{UserID: "u-alice", Role: api.RoleUser}}
	got, err := endpointtest.Read[api.EventsSinceResponse](ctx, since, as, api.EventsSinceRequest{})
	if err != nil || len(got.Events) != len(alice) {
		t.Fatalf("since, no limit: %+v, %v; want alice's %d events", got, err, len(alice))
	}
	for i, e := range got.Events {
		if e.ID != alice[i] {
			t.Errorf("event %d: id %d; want %d", i, e.ID, alice[i])
		}
	}
	if got, err = endpointtest.Read[api.EventsSinceResponse](ctx, since, as, api.EventsSinceRequest{Limit: 1}); err != nil || len(got.Events) != 1 {
		t.Fatalf("since with limit 1: %+v, %v; want one event", got, err)
	}
	for _, limit := range []int{-1, api.MaxEventsSince + 1} {
		if _, err := endpointtest.Read[api.EventsSinceResponse](ctx, since, as, api.EventsSinceRequest{Limit: limit}); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("since with limit %d: got %v; want invalid_argument", limit, err)
		}
	}
}
