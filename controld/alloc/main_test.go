package alloc

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// pgTemplate is the migrated schema every test database here is cloned
// from. controldtest cannot be used: it imports this package.
var pgTemplate = testutil.NewTemplate("alloc", store.Migrate)

// fixture is a database with one user, one project and the default
// catalog: enough for allocation rows to satisfy their foreign keys.
type fixture struct {
	pool    *pgxpool.Pool
	userID  string
	project string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f := &fixture{pool: pool, userID: ids.New(ids.User), project: ids.New(ids.Project)}
	now := time.Now().UTC()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO users (id, email, role, provider, password_hash, created_at)
			VALUES ($1, 'owner@example.test', 'user', 'local', 'x', $2)`, []any{f.userID, now}},
		{`INSERT INTO projects (id, name, created_by, created_at) VALUES ($1, 'proj', $2, $3)`, []any{f.project, f.userID, now}},
		{`INSERT INTO project_members (project_id, user_id, role, added_at) VALUES ($1, $2, 'owner', $3)`, []any{f.project, f.userID, now}},
	} {
		if _, err := pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("fixture: %v", err)
		}
	}
	if err := catalog.Seed(ctx, pool, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	return f
}

// insertAlloc inserts an allocation in state at version and returns it as
// transition expects to receive it.
func (f *fixture) insertAlloc(t *testing.T, state string, version int64, queued bool) api.Allocation {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	a := api.Allocation{ID: ids.New(ids.Allocation), ProjectID: f.project, UserID: f.userID, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, State: state, Version: version, Queued: queued, CreatedAt: now, UpdatedAt: now}
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO allocations
		(id, project_id, user_id, sku_id, shape, gpus, state, version, queued, created_at, updated_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$10)`,
		a.ID, a.ProjectID, a.UserID, a.SKU, a.Shape, a.GPUs, a.State, a.Version, a.Queued, now); err != nil {
		t.Fatalf("insert allocation: %v", err)
	}
	return a
}
