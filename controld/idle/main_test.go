package idle_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("idle")

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
	pool := storetest.Open(t, pgTemplate, 8)
	e := &env{pool: pool, clock: &clock{now: t0}, user: ids.New(ids.User),
		project: api.Project{ID: ids.New(ids.Project), Name: "proj"}}
	storetest.User(t, pool, e.user, "user@example.test", t0)
	storetest.OwnedProject(t, pool, e.project.ID, e.project.Name, e.user, t0)
	storetest.Catalog(t, pool)
	e.settings = idle.Settings{MinPeriod: time.Minute, WarnAhead: 10 * time.Minute}
	var err error
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
	return storetest.Count(t, e.pool, sql, args...)
}

func (e *env) state(t *testing.T, allocID string) string {
	t.Helper()
	var s string
	if err := e.pool.QueryRow(context.Background(), `SELECT state FROM allocations WHERE id = $1`, allocID).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
