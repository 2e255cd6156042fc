package alloc

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

// pgTemplate is the migrated schema every test database here is cloned
// from. controldtest cannot be used: it imports this package.
var pgTemplate = testutil.NewTemplate("alloc", store.Migrate)

// fixture is a database with one user, one project and the default
// catalog: enough for allocation rows to satisfy their foreign keys.
type fixture struct {
	pool    *pgxpool.Pool
	dsn     string
	userID  string
	project string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	dsn := testutil.Postgres(t, pgTemplate)
	pool, err := store.Open(ctx, dsn, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f := &fixture{pool: pool, dsn: dsn, userID: ids.New(ids.User), project: ids.New(ids.Project)}
	now := time.Now().UTC()
	storetest.User(t, pool, f.userID, "owner@example.test", now)
	storetest.Project(t, pool, f.project, "proj", f.userID, now)
	storetest.Member(t, pool, f.project, f.userID, api.ProjectOwner, now)
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
	return storetest.Allocation(t, f.pool, api.Allocation{ProjectID: f.project, UserID: f.userID, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, State: state, Version: version, Queued: queued, CreatedAt: now, UpdatedAt: now})
}
