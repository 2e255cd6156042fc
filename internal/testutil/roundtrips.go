package testutil

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RoundTrips is a pgx tracer counting what connections send to the server
// and wait for: a statement on its own, or a whole batch. Tests of "this
// takes N round trips" read it.
type RoundTrips struct{ n atomic.Int64 }

// Count returns the round trips since the last Reset.
func (c *RoundTrips) Count() int64 { return c.n.Load() }

// Reset starts the count again.
func (c *RoundTrips) Reset() { c.n.Store(0) }

// TraceQueryStart counts a statement on its own.
func (c *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceQueryEnd is part of pgx.QueryTracer.
func (c *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts a batch, sent in one round trip.
func (c *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceBatchQuery is part of pgx.BatchTracer.
func (c *RoundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd is part of pgx.BatchTracer.
func (c *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TracedPool opens a pool on dsn whose round trips trips counts, closed
// when the test ends. It is connected before it returns, outside the count.
func TracedPool(t testing.TB, dsn string, trips *RoundTrips) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	trips.Reset()
	return pool
}
