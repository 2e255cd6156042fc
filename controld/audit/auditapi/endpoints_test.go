package auditapi_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/audit/auditapi"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("auditapi")

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a database with two projects, each with audit rows, and a
// row of no project (the platform's stream).
type world struct {
	pool              *pgxpool.Pool
	defs              []endpoint.Def
	owner, member     string
	admin, other      string
	proj, otherProj   string
	projRows, allRows int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	pool := storetest.Open(t, pgTemplate, 4)
	w := &world{pool: pool, owner: ids.New(ids.User), member: ids.New(ids.User), admin: ids.New(ids.User), other: ids.New(ids.User),
		proj: ids.New(ids.Project), otherProj: ids.New(ids.Project)}
	storetest.Users(t, pool, now, w.owner, w.member, w.admin, w.other)
	storetest.OwnedProject(t, pool, w.proj, "proj", w.owner, now)
	storetest.Member(t, pool, w.proj, w.member, api.ProjectMember, now)
	storetest.OwnedProject(t, pool, w.otherProj, "other", w.other, now)
	if err := project.SetDefault(ctx, pool, w.owner, w.proj, now); err != nil {
		t.Fatal(err)
	}
	write := func(project, action string) {
		if err := audit.Write(ctx, pool, audit.Meta{At: now, ActorID: w.owner, CorrelationID: "c", IdempotencyKey: ids.New("k")},
			audit.Entry{Action: action, TargetType: "thing", TargetID: "t-1", ProjectID: project}); err != nil {
			t.Fatal(err)
		}
	}
	write(w.proj, "thing.make")
	write(w.proj, "thing.break")
	write(w.otherProj, "thing.make")
	write("", "platform.tune")
	w.projRows, w.allRows = 2, 4
	w.defs = auditapi.Endpoints(auditapi.Deps{DB: pool, Now: func() time.Time { return now }})
	return w
}

func (w *world) list(t *testing.T, r *endpoint.Request, req api.AuditListRequest) (*api.AuditListResponse, error) {
	t.Helper()
	return endpointtest.Read[api.AuditListResponse](context.Background(), endpointtest.Find(t, w.defs, api.EndpointAuditList), r, req)
}

func as(user, role string) *endpoint.Request {
	return endpointtest.As(user, role, "")
}

// TestListRefusesBadFilters: each filter out of bounds is
// invalid_argument, checked against the injected clock for since.
func TestListRefusesBadFilters(t *testing.T) {
	w := newWorld(t)
	future := now.Add(2 * time.Minute)
	nearFuture := now.Add(30 * time.Second)
	long := strings.Repeat("a", 201)
	for _, tc := range []struct {
		name string
		req  api.AuditListRequest
		want api.Code
	}{
		{"actor too long", api.AuditListRequest{Project: "proj", Actor: long}, api.CodeInvalidArgument},
		{"action too long", api.AuditListRequest{Project: "proj", Action: long}, api.CodeInvalidArgument},
		{"target too long", api.AuditListRequest{Project: "proj", Target: long}, api.CodeInvalidArgument},
		{"negative limit", api.AuditListRequest{Project: "proj", Limit: -1}, api.CodeInvalidArgument},
		{"limit over the page", api.AuditListRequest{Project: "proj", Limit: api.AuditPageMax + 1}, api.CodeInvalidArgument},
		{"negative after", api.AuditListRequest{Project: "proj", After: -1}, api.CodeInvalidArgument},
		{"newest and after", api.AuditListRequest{Project: "proj", Newest: true, After: 3}, api.CodeInvalidArgument},
		{"since in the future", api.AuditListRequest{Project: "proj", Since: &future}, api.CodeInvalidArgument},
		// A clock a little ahead of controld's is tolerated.
		{"since within a minute", api.AuditListRequest{Project: "proj", Since: &nearFuture}, ""},
		{"at the limits", api.AuditListRequest{Project: "proj", Actor: long[:200], Limit: api.AuditPageMax}, ""},
	} {
		_, err := w.list(t, as(w.owner, api.RoleUser), tc.req)
		endpointtest.WantCode(t, tc.name, err, tc.want)
	}
}

// TestListScope: owners read their project's stream (named, or from the
// header), members and strangers may not, a non-admin asking for every
// project is forbidden, and an admin with no project named reads every
// stream, the platform's included.
func TestListScope(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name     string
		r        *endpoint.Request
		header   string
		req      api.AuditListRequest
		wantRows int
		want     api.Code
	}{
		{"owner, named", as(w.owner, api.RoleUser), "", api.AuditListRequest{Project: "proj"}, w.projRows, ""},
		{"owner, header", as(w.owner, api.RoleUser), "proj", api.AuditListRequest{}, w.projRows, ""},
		{"owner, default", as(w.owner, api.RoleUser), "", api.AuditListRequest{}, w.projRows, ""},
		{"member", as(w.member, api.RoleUser), "", api.AuditListRequest{Project: "proj"}, 0, api.CodeForbidden},
		{"stranger", as(w.other, api.RoleUser), "", api.AuditListRequest{Project: "proj"}, 0, api.CodeNotFound},
		{"user, all projects", as(w.owner, api.RoleUser), "", api.AuditListRequest{AllProjects: true}, 0, api.CodeForbidden},
		{"operator, all projects", as(w.owner, api.RoleOperator), "", api.AuditListRequest{AllProjects: true}, 0, api.CodeForbidden},
		{"admin, nothing named", as(w.admin, api.RoleAdmin), "", api.AuditListRequest{}, w.allRows, ""},
		{"admin, one project", as(w.admin, api.RoleAdmin), "", api.AuditListRequest{Project: "proj"}, w.projRows, ""},
		{"admin, header", as(w.admin, api.RoleAdmin), "other", api.AuditListRequest{}, 1, ""},
	} {
		tc.r.Project = tc.header
		resp, err := w.list(t, tc.r, tc.req)
		endpointtest.WantCode(t, tc.name, err, tc.want)
		if err == nil && len(resp.Records) != tc.wantRows {
			t.Errorf("%s: got %d records; want %d", tc.name, len(resp.Records), tc.wantRows)
		}
	}
}

// TestVerifyEndpointSeesTampering: audit.verify answers over the pool
// (a read-only snapshot of its own) and names an edited row.
func TestVerifyEndpointSeesTampering(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	verify := endpointtest.Find(t, w.defs, api.EndpointAuditVerify)
	resp, err := endpointtest.Read[api.AuditVerifyResponse](ctx, verify, as(w.admin, api.RoleAdmin), api.Empty{})
	if err != nil || !resp.OK {
		t.Fatalf("verify an untouched trail: got %+v, %v; want ok", resp, err)
	}
	// Tampering as audit's own tests do: past the append-only triggers.
	if err := store.InTx(ctx, w.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE audit_logs SET action = 'thing.fix' WHERE action = 'thing.break'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	resp, err = endpointtest.Read[api.AuditVerifyResponse](ctx, verify, as(w.admin, api.RoleAdmin), api.Empty{})
	if err != nil || resp.OK {
		t.Errorf("verify an edited trail: got %+v, %v; want not ok", resp, err)
	}
}
