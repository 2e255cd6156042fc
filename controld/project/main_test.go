package project_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("project")

// now is the tests' fixed clock reading.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newPool is a fresh migrated database.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
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
