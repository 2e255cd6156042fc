package allocapi_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/alloc/allocapi"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// pgTemplate is the migrated schema every test database here is cloned
// from.
var pgTemplate = storetest.Template("allocapi")

// t0 is the tests' clock reading.
var t0 = time.Date(2031, 4, 1, 12, 0, 0, 0, time.UTC)

// served is a database with the default catalog, a user who owns two
// unfunded projects (one and two), a stranger in none, an approved H200
// slice host, a bus, and allocations' endpoints over them; rules are the
// placement rules the endpoints are given, and kicks counts the
// scheduler's wake-ups.
type served struct {
	pool           *pgxpool.Pool
	nc             *nats.Conn
	user, stranger string
	one, two       string
	node           api.Node
	rules          alloc.Rules
	kicks          atomic.Int32
	defs           []endpoint.Def
	run            *mutate.Runner
}

func serve(t *testing.T) *served {
	t.Helper()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := catalog.Seed(ctx, pool, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	s := &served{pool: pool, nc: testutil.NATS(t).Connect(t), user: ids.New(ids.User), stranger: ids.New(ids.User),
		one: ids.New(ids.Project), two: ids.New(ids.Project)}
	storetest.User(t, pool, s.user, "renter@example.test", t0)
	storetest.User(t, pool, s.stranger, "stranger@example.test", t0)
	for _, p := range []string{s.one, s.two} {
		storetest.Project(t, pool, p, p, s.user, t0)
		storetest.Member(t, pool, p, s.user, api.ProjectOwner, t0)
	}
	if s.node, err = node.Register(ctx, pool, sim.SliceHost("slice-1", "H200"), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := node.ApproveSlots(ctx, pool, s.node.ID, nil); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return t0 }
	s.run = &mutate.Runner{Pool: pool, Now: now}
	s.defs = allocapi.Endpoints(allocapi.Deps{DB: pool, NATS: s.nc, Now: now,
		Rules: func() alloc.Rules { return s.rules },
		Idle:  idle.Settings{MinPeriod: time.Minute},
		Kick:  func() { s.kicks.Add(1) }})
	return s
}

// as is a request of user (platform role user) in project, under the
// Idempotency-Key key.
func as(t *testing.T, user, project, key string) *endpoint.Request {
	return &endpoint.Request{Principal: &identity.Principal{UserID: user, Role: api.RoleUser}, Project: project,
		IdempotencyKey: key, Corr: "corr-" + key, Log: testutil.Logger(t)}
}

// create runs alloc.create as the user in project one.
func (s *served) create(t *testing.T, key string, req api.AllocCreateRequest) (*api.Allocation, error) {
	t.Helper()
	return endpointtest.Mutate[api.Allocation](context.Background(), s.run,
		endpointtest.Find(t, s.defs, api.EndpointAllocCreate), as(t, s.user, s.one, key), req)
}

func (s *served) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// written counts the rows a request may leave behind.
func (s *served) written(t *testing.T) int {
	t.Helper()
	return s.count(t, `SELECT (SELECT count(*) FROM allocations) + (SELECT count(*) FROM audit_logs) +
		(SELECT count(*) FROM outbox_events) + (SELECT count(*) FROM idempotency_keys) + (SELECT count(*) FROM node_tasks) +
		(SELECT count(*) FROM idle_allocations)`)
}

func wantCode(t *testing.T, what string, err error, code api.Code) {
	t.Helper()
	if got := api.CodeOf(err); err == nil || got != code {
		t.Errorf("%s: got %v (code %q); want code %q", what, err, got, code)
	}
}

// errorAs is errors.As for an *api.Error.
func errorAs(err error, e **api.Error) bool { return errors.As(err, e) }

// hintOf is e's hint, "" for no error.
func hintOf(e *api.Error) string {
	if e == nil {
		return ""
	}
	return e.Hint
}
