package storetest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// Open is a database of the test's own, cloned from tmpl (the package's
// testutil.NewTemplate of store.Migrate, from a TestMain that calls
// testutil.Main), opened as the schema's owner with at most conns
// connections and closed when the test ends.
func Open(t testing.TB, tmpl *testutil.Template, conns int32) *pgxpool.Pool {
	t.Helper()
	return Connect(t, testutil.Postgres(t, tmpl), conns, "")
}

// Connect opens a pool of at most conns connections to dsn whose
// connections act as role (store.OpenAs: "" is the login role, which owns
// the schema; store.AppRole is controld's), closed when the test ends.
func Connect(t testing.TB, dsn string, conns int32, role string) *pgxpool.Pool {
	t.Helper()
	pool, err := store.OpenAs(context.Background(), dsn, conns, role)
	if err != nil {
		t.Fatalf("fixture database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Count is the one integer that sql (a count) selects, failing the test
// on error.
func Count(t testing.TB, q store.Querier, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := q.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// InTx runs fn in a transaction of pool that commits when fn returns no
// error and is rolled back otherwise, as a mutation's is; it returns fn's
// error or the commit's. Beginning fails the test.
func InTx(t testing.TB, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("fixture transaction: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Template is a package's template database: controld's schema
// (store.Migrate), migrated once per test binary and cloned by each Open.
// label names it; the package's TestMain runs testutil.Main.
func Template(label string) *testutil.Template {
	return testutil.NewTemplate(label, store.Migrate)
}
