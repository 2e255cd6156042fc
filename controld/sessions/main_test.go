package sessions_test

import (
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("sessions")

// t0 is the tests' clock reading at the start of a session.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a database with two users of one project, each with an
// allocation.
type world struct {
	pool         *pgxpool.Pool
	alice, bob   string
	aliceAlloc   string
	bobAlloc     string
	projectOfBob string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	w := &world{pool: pool, alice: ids.New(ids.User), bob: ids.New(ids.User), projectOfBob: ids.New(ids.Project)}
	storetest.User(t, pool, w.alice, "alice@example.test", t0)
	storetest.User(t, pool, w.bob, "bob@example.test", t0)
	storetest.Project(t, pool, w.projectOfBob, "proj", w.bob, t0)
	storetest.Catalog(t, pool)
	alloc := func(user string) string {
		return storetest.Allocation(t, pool, api.Allocation{ProjectID: w.projectOfBob, UserID: user, SKU: "h200-slice",
			Shape: api.ShapeGPUSlice, GPUs: 1, State: api.AllocActive}).ID
	}
	w.aliceAlloc, w.bobAlloc = alloc(w.alice), alloc(w.bob)
	return w
}

func (w *world) count(t *testing.T) int {
	t.Helper()
	return storetest.Count(t, w.pool, `SELECT count(*) FROM terminal_sessions`)
}
