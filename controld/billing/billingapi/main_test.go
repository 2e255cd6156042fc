package billingapi_test

import (
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/billing/billingapi"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("billingapi")

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
	endpointtest.Harness
}

func newFixture(t *testing.T, settings billing.Settings) *fixture {
	t.Helper()
	dsn := testutil.Postgres(t, pgTemplate)
	owner, app := storetest.Connect(t, dsn, 4, ""), storetest.Connect(t, dsn, 8, store.AppRole)
	storetest.Catalog(t, owner)
	f := &fixture{owner: owner, app: app, alice: ids.New(ids.User), bob: ids.New(ids.User), carol: ids.New(ids.User),
		projectID: ids.New(ids.Project), project: "research"}
	storetest.Users(t, owner, now, f.alice, f.bob, f.carol)
	storetest.OwnedProject(t, owner, f.projectID, f.project, f.alice, now)
	storetest.Member(t, owner, f.projectID, f.bob, api.ProjectMember, now)
	clock := func() time.Time { return now }
	f.Harness = endpointtest.Serve(app, clock, billingapi.Endpoints(billingapi.Deps{DB: app, Settings: settings, Now: clock}))
	return f
}

// as is a request of user (platform role user) in no project header.
func as(user string) *endpoint.Request {
	return endpointtest.User(user, "")
}

// count runs a count query as the schema's owner.
func (f *fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return storetest.Count(t, f.owner, sql, args...)
}

func codeOf(err error) api.Code {
	if err == nil {
		return ""
	}
	return api.CodeOf(err)
}
