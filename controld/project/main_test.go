package project_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("project", store.Migrate)

// now is the tests' fixed clock reading.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newPool is a fresh migrated database.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := store.Open(context.Background(), testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newUser inserts a user and returns its id.
func newUser(t *testing.T, pool *pgxpool.Pool, email string) string {
	t.Helper()
	id := ids.New(ids.User)
	storetest.User(t, pool, id, email, now)
	return id
}

// inTx runs fn in a transaction committed when fn succeeds, rolled back
// otherwise: as a handler's mutation does.
func inTx(t *testing.T, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), pool, fn)
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func wantCode(t *testing.T, what string, err error, code api.Code) {
	t.Helper()
	if got := api.CodeOf(err); got != code {
		t.Errorf("%s: got error %v (code %q); want code %q", what, err, got, code)
	}
}
