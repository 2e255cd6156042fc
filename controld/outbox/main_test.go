package outbox

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("outbox", store.Migrate)

// fixture is a migrated database and an embedded NATS server with the
// EVENTS stream. Its clock is years behind the wall clock, so that a row
// is due by the relay's clock and not by the database's.
type fixture struct {
	dsn   string
	pool  *pgxpool.Pool
	bus   *testutil.Bus
	nc    *nats.Conn
	js    jetstream.JetStream
	clock *testutil.Clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{dsn: testutil.Postgres(t, pgTemplate), clock: testutil.NewClock(time.Date(2020, 3, 1, 12, 0, 0, 0, time.UTC))}
	f.pool = f.openPool(t)
	f.bus = testutil.NATS(t)
	f.nc = f.bus.Connect(t)
	var err error
	if f.js, err = jetstream.New(f.nc); err != nil {
		t.Fatal(err)
	}
	if err := EnsureStream(ctx, f.js, 1, 1<<30, 7*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	return f
}

// openPool opens another pool on the fixture's database, as another
// controld replica would.
func (f *fixture) openPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := store.Open(context.Background(), f.dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func (f *fixture) relay(t *testing.T, edit func(*RelayConfig)) *Relay {
	t.Helper()
	cfg := RelayConfig{Pool: f.pool, JS: f.js, Now: f.clock.Now, Log: testutil.Logger(t)}
	if edit != nil {
		edit(&cfg)
	}
	r, err := NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// enqueue commits n events, each in its own transaction as mutations do,
// and returns their ids.
func (f *fixture) enqueue(t *testing.T, n int, users ...string) []int64 {
	t.Helper()
	var out []int64
	for i := range n {
		id, err := Enqueue(context.Background(), f.pool, f.clock.Now(), Event{Kind: api.EventAllocState,
			Subject: "a-" + strconv.Itoa(i), Users: users, Payload: map[string]int{"n": i}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// outboxRow is a row's delivery bookkeeping.
type outboxRow struct {
	state     string
	attempts  int
	lastError string
	published bool
	next      time.Time
}

func (f *fixture) row(t *testing.T, id int64) outboxRow {
	t.Helper()
	var r outboxRow
	if err := f.pool.QueryRow(context.Background(), `SELECT state, attempts, last_error, published_at IS NOT NULL, next_attempt_at
		FROM outbox_events WHERE id = $1`, id).Scan(&r.state, &r.attempts, &r.lastError, &r.published, &r.next); err != nil {
		t.Fatalf("read outbox row %d: %v", id, err)
	}
	return r
}

func (f *fixture) countState(t *testing.T, state string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_events WHERE state = $1`, state).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// streamMsgs returns every message in the EVENTS stream, oldest first.
func (f *fixture) streamMsgs(t *testing.T) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := f.js.Stream(ctx, api.EventStreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// msgIDs counts the stream's messages by Nats-Msg-Id.
func (f *fixture) msgIDs(t *testing.T) map[string]int {
	t.Helper()
	ids := map[string]int{}
	for _, m := range f.streamMsgs(t) {
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	return ids
}

// wantEachOnce fails t unless the stream holds exactly one message for
// each of ids and nothing else.
func (f *fixture) wantEachOnce(t *testing.T, ids []int64) {
	t.Helper()
	got := f.msgIDs(t)
	for _, id := range ids {
		if n := got[strconv.FormatInt(id, 10)]; n != 1 {
			t.Errorf("stream messages with Nats-Msg-Id %d: got %d; want 1", id, n)
		}
	}
	if len(got) != len(ids) {
		t.Errorf("stream holds %d distinct ids; want %d", len(got), len(ids))
	}
}
