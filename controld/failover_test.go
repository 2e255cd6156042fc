package controld_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestCreateFailsOverWhenReplicaDies: an alloc.create taken by a replica
// that dies with it in hand (cut off the bus while its transaction waits
// in the database) is sent again by the client, with the same key, to the
// other replica, and succeeds there: exactly one allocation. Before, the
// client waited out its whole timeout and failed.
func TestCreateFailsOverWhenReplicaDies(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := context.Background()
	user := api.NewClient(env.UserConn(t, env.Admin.ID, env.AdminToken), api.WithToken(env.AdminToken),
		api.WithProject(env.Project.Name), api.WithTimeout(2*time.Minute), api.WithAttemptTimeout(2*time.Second))

	// Hold alloc.create in the database, so that it is on the replica
	// when the replica dies.
	db, err := pgx.Connect(ctx, env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `LOCK TABLE allocations IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	const key = "k-failover"
	type result struct {
		a   *api.Allocation
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		a, err := user.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, api.WithIdempotencyKey(key))
		done <- result{a, err}
	}()
	monitor, err := pgx.Connect(ctx, env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = monitor.Close(context.Background()) })
	testutil.Eventually(t, "alloc.create to wait in the database", func() bool {
		var n int
		err := monitor.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO allocations%'`).Scan(&n)
		return err == nil && n == 1
	})
	other := env.StartReplica(t, nil)
	env.Crash(t, other)
	crashed := time.Now()
	// The dead replica's transaction may now commit (its database
	// connection lives on, as a replica cut off the bus keeps it): the
	// retry must then replay its reply, not create a second allocation.
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("create: got %v; want success on the other replica", r.err)
	}
	t.Logf("create answered %v after the crash (%v in all)", time.Since(crashed).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	var allocs, keys int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM allocations`).Scan(&allocs); err != nil {
		t.Fatal(err)
	}
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE key = $1`, key).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if allocs != 1 || keys != 1 {
		t.Fatalf("%d allocations, %d idempotency records; want 1 and 1", allocs, keys)
	}
	got, err := user.AllocGet(ctx, r.a.ID)
	if err != nil || got.ID != r.a.ID {
		t.Fatalf("the allocation the reply names: got %v, %v", got, err)
	}
}
