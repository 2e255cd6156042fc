package idle_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("idle", store.Migrate)

// t0 is when the tests' allocations became active.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// env is a database with a project of one user, and an evaluator on it
// with a 10-minute warning ahead.
type env struct {
	pool     *pgxpool.Pool
	clock    *clock
	runner   *idle.Runner
	settings idle.Settings
	user     string
	project  api.Project
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := &env{pool: pool, clock: &clock{now: t0}, user: ids.New(ids.User),
		project: api.Project{ID: ids.New(ids.Project), Name: "proj"}}
	storetest.User(t, pool, e.user, "user@example.test", t0)
	storetest.Project(t, pool, e.project.ID, e.project.Name, e.user, t0)
	storetest.Member(t, pool, e.project.ID, e.user, api.ProjectOwner, t0)
	if err := catalog.Seed(ctx, pool, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	e.settings = idle.Settings{MinPeriod: time.Minute, WarnAhead: 10 * time.Minute}
	e.runner, err = idle.NewRunner(idle.Config{Settings: e.settings, Pool: pool,
		Mutations: &mutate.Runner{Pool: pool, Now: e.clock.Now}, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.settings.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	return e
}

// active inserts an allocation of the project, active since t0.
func (e *env) active(t *testing.T) string {
	t.Helper()
	return storetest.Allocation(t, e.pool, api.Allocation{ProjectID: e.project.ID, UserID: e.user, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, State: api.AllocActive, CreatedAt: t0}).ID
}

// tick runs the evaluator once at at.
func (e *env) tick(t *testing.T, at time.Time) idle.TickResult {
	t.Helper()
	e.clock.Set(at)
	res, err := e.runner.Tick(context.Background())
	if err != nil {
		t.Fatalf("tick at %v: %v", at, err)
	}
	return res
}

func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (e *env) state(t *testing.T, allocID string) string {
	t.Helper()
	var s string
	if err := e.pool.QueryRow(context.Background(), `SELECT state FROM allocations WHERE id = $1`, allocID).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func wantCode(t *testing.T, what string, err error, code api.Code) {
	t.Helper()
	if got := api.CodeOf(err); got != code {
		t.Errorf("%s: got error %v (code %q); want code %q", what, err, got, code)
	}
}
