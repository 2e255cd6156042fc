package exposures_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/exposures"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("exposures")

// fixture is a database with a user owning a project with an active
// allocation.
type fixture struct {
	pool                 *pgxpool.Pool
	user, project, alloc string
	now                  time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	f := &fixture{pool: pool, user: ids.New(ids.User), project: ids.New(ids.Project),
		now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	storetest.Catalog(t, pool)
	storetest.User(t, pool, f.user, "ex@example.test", f.now)
	storetest.OwnedProject(t, pool, f.project, "proj", f.user, f.now)
	f.alloc = storetest.Allocation(t, pool, api.Allocation{ProjectID: f.project, UserID: f.user, SKU: "h100-baremetal",
		Shape: api.ShapeBaremetal, GPUs: 8, State: api.AllocActive}).ID
	return f
}

func (f *fixture) create(t *testing.T, port int, name string, ttl time.Duration) (api.Exposure, error) {
	t.Helper()
	return exposures.Create(context.Background(), f.pool, exposures.CreateArgs{ProjectID: f.project,
		AllocationID: f.alloc, Port: port, Share: api.ShareMe, Name: name, TTL: ttl, ActorID: f.user}, f.now)
}

func wantCode(t *testing.T, err error, code api.Code) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != code {
		t.Fatalf("got %v; want %s", err, code)
	}
}

func TestCreateListRemove(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	e, err := f.create(t, 8888, "nb", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if e.Host != "8888-"+f.alloc || !e.ExpiresAt.Equal(f.now.Add(time.Hour)) {
		t.Fatalf("got host %s expiring %s; want 8888-%s at %s", e.Host, e.ExpiresAt, f.alloc, f.now.Add(time.Hour))
	}
	_, err = f.create(t, 8888, "", time.Hour)
	wantCode(t, err, api.CodeConflict)
	_, err = f.create(t, 8889, "nb", time.Hour)
	wantCode(t, err, api.CodeConflict)
	list, err := exposures.List(ctx, f.pool, f.project, "", f.now)
	if err != nil || len(list) != 1 || list[0].ID != e.ID {
		t.Fatalf("list: got %+v, %v; want [%s]", list, err, e.ID)
	}
	byName, err := exposures.Find(ctx, f.pool, f.project, "nb", f.now)
	if err != nil || byName.ID != e.ID {
		t.Fatalf("find by name: got %+v, %v; want %s", byName, err, e.ID)
	}
	if _, err := exposures.Find(ctx, f.pool, "", "nb", f.now); err == nil {
		t.Fatal("find by name without a project: got an exposure; want not_found")
	}
	gone, err := exposures.Remove(ctx, f.pool, e.ID, f.now.Add(time.Minute))
	if err != nil || gone.RemovedAt == nil || gone.Ended != exposures.EndedRemoved {
		t.Fatalf("remove: got %+v, %v; want removed", gone, err)
	}
	_, err = exposures.Remove(ctx, f.pool, e.ID, f.now)
	wantCode(t, err, api.CodeNotFound)
	host, found, err := exposures.ByHost(ctx, f.pool, f.alloc, 8888)
	if err != nil || !found || host.Ended != exposures.EndedRemoved {
		t.Fatalf("by host after removal: got %+v, %v, %v; want the removed exposure", host, found, err)
	}
	if _, err := f.create(t, 8888, "nb", time.Hour); err != nil {
		t.Fatalf("the port and name of a removed exposure are free again: %v", err)
	}
}

// TestExpiredExposureFreesItsPort: an exposure past its TTL is not live —
// not listed, not found — and a new exposure of its port ends it as
// expired instead of conflicting with it.
func TestExpiredExposureFreesItsPort(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old, err := f.create(t, 9000, "api", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	later := f.now.Add(11 * time.Second)
	if list, err := exposures.List(ctx, f.pool, f.project, f.alloc, later); err != nil || len(list) != 0 {
		t.Fatalf("list after expiry: got %+v, %v; want none", list, err)
	}
	f.now = later
	if _, err := f.create(t, 9000, "api", time.Hour); err != nil {
		t.Fatalf("create over an expired exposure: %v", err)
	}
	e, found, err := exposures.ByHost(ctx, f.pool, f.alloc, 9000)
	if err != nil || !found || e.ID == old.ID || e.RemovedAt != nil {
		t.Fatalf("by host: got %+v, %v, %v; want the new live exposure", e, found, err)
	}
	var ended string
	if err := f.pool.QueryRow(ctx, `SELECT ended FROM exposures WHERE id = $1`, old.ID).Scan(&ended); err != nil || ended != exposures.EndedExpired {
		t.Fatalf("old exposure: got ended %q, %v; want expired", ended, err)
	}
}

// TestReleaseEndsExposures goes through the allocation's release settler:
// when the node reports the release done, the allocation's exposures end
// (as released) in that transaction, each with its expose.changed event.
func TestReleaseEndsExposures(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	e, err := f.create(t, 8888, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE allocations SET state = 'releasing' WHERE id = $1`, f.alloc); err != nil {
		t.Fatal(err)
	}
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	eff, err := alloc.Settlers(nil)[api.TaskDeprovisionUser](ctx, tx, tasks.Outcome{TaskID: ids.New(ids.Task),
		AllocationID: f.alloc, Type: api.TaskDeprovisionUser, Result: hostproto.TaskResult{Status: hostproto.TaskSucceeded},
		Now: f.now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var told bool
	for _, ev := range eff.Events {
		if ev.Kind == api.EventExposure && ev.Subject == e.ID {
			told = ev.Payload.(api.Exposure).Ended == exposures.EndedReleased
		}
	}
	if !told {
		t.Fatalf("release events: got %+v; want an %s event for %s, ended released", eff.Events, api.EventExposure, e.ID)
	}
	got, _, err := exposures.ByHost(ctx, f.pool, f.alloc, 8888)
	if err != nil || got.RemovedAt == nil || got.Ended != exposures.EndedReleased {
		t.Fatalf("after release: got %+v, %v; want ended released", got, err)
	}
}
