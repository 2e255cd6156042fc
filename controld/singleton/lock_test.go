package singleton_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/singleton"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

var pgTemplate = testutil.NewTemplate("singleton", store.Migrate)

// TestTryLockOneAtATime: while one transaction holds a key, another
// does not get it, a different key is free, and the key is free again
// once the holder ends.
func TestTryLockOneAtATime(t *testing.T) {
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	begin := func() pgx.Tx {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		return tx
	}
	try := func(tx pgx.Tx, key string) bool {
		t.Helper()
		ok, err := singleton.TryLock(ctx, tx, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	holder := begin()
	if !try(holder, "a") {
		t.Fatal("first TryLock(a): got false; want true")
	}
	other := begin()
	if try(other, "a") {
		t.Error("second TryLock(a) while held: got true; want false")
	}
	if !try(other, "b") {
		t.Error("TryLock(b) while a is held: got false; want true")
	}
	var timeout string
	if err := holder.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "10s" {
		t.Errorf("holder's idle_in_transaction_session_timeout got %s; want 10s", timeout)
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !try(begin(), "a") {
		t.Error("TryLock(a) after its holder committed: got false; want true")
	}
}
