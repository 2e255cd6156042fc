package sessions_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("sessions", store.Migrate)

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
	pool, err := store.Open(context.Background(), testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w := &world{pool: pool, alice: ids.New(ids.User), bob: ids.New(ids.User), projectOfBob: ids.New(ids.Project)}
	storetest.User(t, pool, w.alice, "alice@example.test", t0)
	storetest.User(t, pool, w.bob, "bob@example.test", t0)
	storetest.Project(t, pool, w.projectOfBob, "proj", w.bob, t0)
	if err := catalog.Seed(context.Background(), pool, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	alloc := func(user string) string {
		return storetest.Allocation(t, pool, api.Allocation{ProjectID: w.projectOfBob, UserID: user, SKU: "h200-slice",
			Shape: api.ShapeGPUSlice, GPUs: 1, State: api.AllocActive}).ID
	}
	w.aliceAlloc, w.bobAlloc = alloc(w.alice), alloc(w.bob)
	return w
}

func (w *world) count(t *testing.T) int {
	t.Helper()
	var n int
	if err := w.pool.QueryRow(context.Background(), `SELECT count(*) FROM terminal_sessions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantCode(t *testing.T, what string, err error, code api.Code) {
	t.Helper()
	if got := api.CodeOf(err); got != code {
		t.Errorf("%s: got error %v (code %q); want code %q", what, err, got, code)
	}
}
