package billingapi_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/billing/billingapi"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("billingapi", store.Migrate)

// now is the tests' fixed clock reading.
var now = time.Date(2031, 3, 10, 12, 0, 0, 0, time.UTC)

// fixture is a test database (owner: the schema's owner, for setup and
// checks; app: controld's role, which the endpoints use), the default
// catalog, a project owned by alice with bob as a member, carol in no
// project, and the billing endpoints over it.
type fixture struct {
	owner, app         *pgxpool.Pool
	alice, bob, carol  string
	projectID, project string
	defs               []endpoint.Def
	run                *mutate.Runner
}

func newFixture(t *testing.T, settings billing.Settings) *fixture {
	t.Helper()
	ctx := context.Background()
	dsn := testutil.Postgres(t, pgTemplate)
	owner, err := store.Open(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	app, err := store.OpenAs(ctx, dsn, 8, store.AppRole)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	if err := catalog.Seed(ctx, owner, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	f := &fixture{owner: owner, app: app, alice: ids.New(ids.User), bob: ids.New(ids.User), carol: ids.New(ids.User),
		projectID: ids.New(ids.Project), project: "research"}
	for _, u := range []string{f.alice, f.bob, f.carol} {
		storetest.User(t, owner, u, u+"@example.test", now)
	}
	storetest.Project(t, owner, f.projectID, f.project, f.alice, now)
	storetest.Member(t, owner, f.projectID, f.alice, api.ProjectOwner, now)
	storetest.Member(t, owner, f.projectID, f.bob, api.ProjectMember, now)
	clock := func() time.Time { return now }
	f.run = &mutate.Runner{Pool: app, Now: clock}
	f.defs = billingapi.Endpoints(billingapi.Deps{DB: app, Settings: settings, Now: clock})
	return f
}

// as is a request of user (platform role user) in no project header.
func as(user string) *endpoint.Request {
	return &endpoint.Request{Principal: &identity.Principal{UserID: user, Role: api.RoleUser}}
}

// count runs a count query as the schema's owner.
func (f *fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.owner.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func codeOf(err error) api.Code {
	if err == nil {
		return ""
	}
	return api.CodeOf(err)
}
