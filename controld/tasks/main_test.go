package tasks

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// pgTemplate is the migrated schema every test database here is cloned
// from. controldtest cannot be used: it imports this package.
var pgTemplate = testutil.NewTemplate("tasks", store.Migrate)

// fixture is a database with a node and an allocation of a project, for
// tasks to belong to.
type fixture struct {
	pool   *pgxpool.Pool
	nodeID string
	allocs string
	now    time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	now := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	f := &fixture{pool: pool, nodeID: ids.New(ids.Node), now: now}
	user, project := ids.New(ids.User), ids.New(ids.Project)
	storetest.User(t, pool, user, "owner@example.test", now)
	storetest.Project(t, pool, project, "proj", user, now)
	storetest.Member(t, pool, project, user, api.ProjectOwner, now)
	if err := catalog.Seed(ctx, pool, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	f.allocs = storetest.Allocation(t, pool, api.Allocation{ProjectID: project, UserID: user, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, State: api.AllocProvisioning, CreatedAt: now, UpdatedAt: now}).ID
	if _, err := pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
		VALUES ($1, 'node-1', 'gpu_slice', 'H200', 'ready', $2, $2)`, f.nodeID, now); err != nil {
		t.Fatal(err)
	}
	return f
}

// task queues a task of typ for the fixture's allocation, created at
// f.now plus offset, and marks it running.
func (f *fixture) task(t *testing.T, typ string, offset time.Duration) string {
	t.Helper()
	ctx := context.Background()
	id, err := Enqueue(ctx, f.pool, Task{NodeID: f.nodeID, AllocationID: f.allocs, Type: typ}, f.now.Add(offset))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// report records a live progress report in its own transaction and
// returns the phases it made publishable, as "phase/status" strings.
func (f *fixture) report(t *testing.T, p hostproto.TaskProgress) ([]string, error) {
	t.Helper()
	var out []string
	err := pgx.BeginFunc(context.Background(), f.pool, func(tx pgx.Tx) error {
		pr, err := RecordProgress(context.Background(), tx, f.nodeID, p, f.now)
		for _, ph := range pr.Publish {
			out = append(out, ph.Phase+"/"+ph.Status)
		}
		return err
	})
	return out, err
}

// settle applies a result in its own transaction and returns the phases
// it made publishable.
func (f *fixture) settle(t *testing.T, r hostproto.TaskResult) []string {
	t.Helper()
	var out []string
	err := pgx.BeginFunc(context.Background(), f.pool, func(tx pgx.Tx) error {
		s, ok, err := Settle(context.Background(), tx, f.nodeID, r, f.now)
		if err != nil {
			return err
		}
		if !ok {
			t.Fatalf("result of %s was not applied", r.TaskID)
		}
		for _, ph := range s.Publish {
			out = append(out, ph.Phase+"/"+ph.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
