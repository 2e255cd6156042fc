package mutate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestRunCommitsInTheFinalRoundTrip: a Final that leaves nothing to
// check afterwards gets the COMMIT in its round trip
// (docs/decisions/0067-create-lock-order.md): three round trips in all,
// the rows committed, the connection back in the pool idle (the next
// mutation on it runs). A Final statement that fails skips the COMMIT:
// nothing is stored and the key may be used again.
func TestRunCommitsInTheFinalRoundTrip(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(testutil.Postgres(t, pgTemplate))
	if err != nil {
		t.Fatal(err)
	}
	var trips testutil.RoundTrips
	cfg.ConnConfig.Tracer = &trips
	cfg.MaxConns = 1 // every Run on the same connection
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := &mutate.Runner{Pool: pool, Now: time.Now}
	withFinal := func(sql string) mutate.Func {
		return func(context.Context, pgx.Tx) (any, mutate.Effect, error) {
			eff := effect("x")
			eff.Final = func(b *pgx.Batch) func(context.Context, pgx.Tx) error {
				b.Queue(sql)
				return nil
			}
			return "ok", eff, nil
		}
	}

	req := mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: "k-fail", Fingerprint: []byte(`{}`)}
	if _, err := r.Run(t.Context(), req, withFinal(`SELECT 1 / ((random() < 2)::int * 0)`)); err == nil {
		t.Fatal("a failing Final statement: got no error")
	}
	if got := countRows(t, pool); got != (rows{}) {
		t.Fatalf("after a failing Final statement: %+v; want nothing stored", got)
	}

	trips.Reset()
	if _, err := r.Run(t.Context(), req, withFinal(`SELECT 1`)); err != nil {
		t.Fatalf("the same key again: %v", err)
	}
	if got, want := trips.Count(), int64(3); got != want {
		t.Errorf("round trips with the COMMIT in the final one: got %d; want %d", got, want)
	}
	if got, want := countRows(t, pool), (rows{audit: 1, outbox: 1, keys: 1}); got != want {
		t.Errorf("rows: got %+v; want %+v", got, want)
	}
	req.Key = "k-next"
	if _, err := r.Run(t.Context(), req, withFinal(`SELECT 1`)); err != nil {
		t.Fatalf("the next mutation on the connection: %v", err)
	}
	if got, want := countRows(t, pool), (rows{audit: 2, outbox: 2, keys: 2}); got != want {
		t.Errorf("rows after the next: got %+v; want %+v", got, want)
	}

	// A check in this process that fails on a result of the round trip
	// whose COMMIT the server ran: committed, so the reply is the
	// response, not an error a retry without a key would repeat.
	req.Key = "k-client-check"
	clientCheck := func(context.Context, pgx.Tx) (any, mutate.Effect, error) {
		eff := effect("x")
		eff.Final = func(b *pgx.Batch) func(context.Context, pgx.Tx) error {
			b.Queue(`SELECT 1`).Fn = func(br pgx.BatchResults) error {
				_, _ = br.Exec()
				return errors.New("a client-side check that disagrees")
			}
			return nil
		}
		return "ok", eff, nil
	}
	if out, err := r.Run(t.Context(), req, clientCheck); err != nil || string(out) != `"ok"` {
		t.Fatalf("a client-side check failing after the COMMIT ran: %q, %v; want the committed response", out, err)
	}
	if got, want := countRows(t, pool), (rows{audit: 3, outbox: 3, keys: 3}); got != want {
		t.Errorf("rows after it: got %+v; want %+v", got, want)
	}
}
