package mutate_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// roundTrips counts what a connection sends to the server and waits for:
// a statement on its own, or a whole batch.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestRunTakesFourRoundTrips is the regression test of creates with fewer
// round trips (bench/README.md, alloc.create): besides the mutation's own
// statements, Run costs BEGIN, one batch taking the key's lock and
// reading its record, one batch writing the audit row, the outbox rows
// and the idempotency record, and COMMIT. It was seven with one event
// (each statement on its own).
func TestRunTakesFourRoundTrips(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(testutil.Postgres(t, pgTemplate))
	if err != nil {
		t.Fatal(err)
	}
	var trips roundTrips
	cfg.ConnConfig.Tracer = &trips
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(t.Context()); err != nil { // connect outside the count
		t.Fatal(err)
	}
	r := &mutate.Runner{Pool: pool, Now: time.Now}
	fn := func(context.Context, pgx.Tx) (any, mutate.Effect, error) { return reply{Zeta: "z"}, effect("x"), nil }
	req := mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: "k-trips", Fingerprint: []byte(`{}`)}

	trips.n.Store(0)
	if _, err := r.Run(t.Context(), req, fn); err != nil {
		t.Fatal(err)
	}
	if got, want := trips.n.Load(), int64(4); got != want {
		t.Errorf("round trips of a mutation with one event: got %d; want %d", got, want)
	}
	if got, want := countRows(t, pool), (rows{audit: 1, outbox: 1, keys: 1}); got != want {
		t.Errorf("rows: got %+v; want %+v", got, want)
	}

	// The replay: BEGIN, the lock-and-lookup batch, COMMIT.
	trips.n.Store(0)
	if _, err := r.Run(t.Context(), req, fn); err != nil {
		t.Fatal(err)
	}
	if got, want := trips.n.Load(), int64(3); got != want {
		t.Errorf("round trips of a replay: got %d; want %d", got, want)
	}
}
