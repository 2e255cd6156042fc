package alloc

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestFundsLockHolderLeftIdleIsEnded: a transaction holding a project's
// funds lock and then left idle — a replica paused (SIGSTOP) or cut off
// mid-create — is ended by the server after 10 s, so the project's next
// create takes the lock then, not after store's 30 s (while it waited,
// every create of the project held a pool connection: the partition
// suite's paused-replica fault saw the API starve).
func TestFundsLockHolderLeftIdleIsEnded(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the server's idle-in-transaction timeout")
	}
	f := newFixture(t)
	ctx := context.Background()
	held, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx) //nolint:errcheck // the server ended it
	if err := lockFunds(ctx, held, f.project); err != nil {
		t.Fatal(err)
	}
	// The holder now says nothing, as a paused process would.
	start := time.Now()
	err = pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error { return lockFunds(ctx, tx, f.project) })
	waited := time.Since(start)
	if err != nil {
		t.Fatalf("the second lock: %v", err)
	}
	if waited > 20*time.Second {
		t.Errorf("the second lock waited %s for an idle holder; want it ended after 10 s", waited.Round(time.Second))
	}
	if waited < 9*time.Second {
		t.Errorf("the second lock waited only %s: the holder did not hold it", waited.Round(time.Second))
	}
}
