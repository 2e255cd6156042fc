package mutate_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestRunTakesFourRoundTrips is the regression test of creates with fewer
// round trips (bench/README.md, alloc.create): besides the mutation's own
// statements, Run costs BEGIN, one batch taking the key's lock and
// reading its record, one batch writing the audit row, the outbox rows
// and the idempotency record, and COMMIT. It was seven with one event
// (each statement on its own).
func TestRunTakesFourRoundTrips(t *testing.T) {
	t.Parallel()
	var trips testutil.RoundTrips
	pool := testutil.TracedPool(t, testutil.Postgres(t, pgTemplate), &trips)
	r := &mutate.Runner{Pool: pool, Now: time.Now}
	fn := func(context.Context, pgx.Tx) (any, mutate.Effect, error) { return reply{Zeta: "z"}, effect("x"), nil }
	req := mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: "k-trips", Fingerprint: []byte(`{}`)}

	trips.Reset()
	if _, err := r.Run(t.Context(), req, fn); err != nil {
		t.Fatal(err)
	}
	if got, want := trips.Count(), int64(4); got != want {
		t.Errorf("round trips of a mutation with one event: got %d; want %d", got, want)
	}
	if got, want := countRows(t, pool), (rows{audit: 1, outbox: 1, keys: 1}); got != want {
		t.Errorf("rows: got %+v; want %+v", got, want)
	}

	// The replay: BEGIN, the lock-and-lookup batch, COMMIT.
	trips.Reset()
	if _, err := r.Run(t.Context(), req, fn); err != nil {
		t.Fatal(err)
	}
	if got, want := trips.Count(), int64(3); got != want {
		t.Errorf("round trips of a replay: got %d; want %d", got, want)
	}
}
