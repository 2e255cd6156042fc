package apps_test

import (
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("apps")

// t0 is the tests' fixed clock reading.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// newPool is a fresh migrated database with user u-1 owning project p-1
// (research).
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	storetest.User(t, pool, "u-1", "ann@example.test", t0)
	storetest.OwnedProject(t, pool, "p-1", "research", "u-1", t0)
	return pool
}
