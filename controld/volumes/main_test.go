package volumes_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("volumes", store.Migrate)

// fixture is a database with a user, a project and two nodes, one
// reporting room for volumes.
type fixture struct {
	pool            *pgxpool.Pool
	user, project   string
	node, otherNode api.Node
	now             time.Time
}

const gib = int64(1) << 30

func newFixture(t *testing.T, room int64) *fixture {
	t.Helper()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f := &fixture{pool: pool, user: ids.New(ids.User), project: ids.New(ids.Project), now: time.Now().UTC()}
	storetest.User(t, pool, f.user, "vol@example.test", f.now)
	storetest.Project(t, pool, f.project, "proj", f.user, f.now)
	storetest.Member(t, pool, f.project, f.user, api.ProjectOwner, f.now)
	if f.node, err = node.Register(ctx, pool, sim.BaremetalHost("bm-1", "H100"), f.now); err != nil {
		t.Fatal(err)
	}
	if f.otherNode, err = node.Register(ctx, pool, sim.BaremetalHost("bm-2", "H100"), f.now); err != nil {
		t.Fatal(err)
	}
	f.report(t, f.node.ID, room)
	return f
}

// report records a node's health probe saying how much room it has.
func (f *fixture) report(t *testing.T, nodeID string, room int64) {
	t.Helper()
	probe, _ := json.Marshal(map[string]any{"volume_free_bytes": room})
	if err := node.SetHealth(context.Background(), f.pool, nodeID, probe, "", "", f.now); err != nil {
		t.Fatal(err)
	}
}

// in runs fn in a transaction that commits when fn succeeds.
func (f *fixture) in(t *testing.T, fn func(tx pgx.Tx) error) error {
	t.Helper()
	tx, err := f.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(context.Background())
}

func (f *fixture) create(t *testing.T, name string, size int64, nodeRef string) (api.Volume, error) {
	t.Helper()
	var v api.Volume
	err := f.in(t, func(tx pgx.Tx) error {
		var err error
		v, _, err = volumes.Create(context.Background(), tx, volumes.CreateArgs{ProjectID: f.project, Name: name,
			SizeBytes: size, Node: nodeRef, ActorID: f.user}, f.now)
		return err
	})
	return v, err
}

// settle applies a node's result of the volume's current task.
func (f *fixture) settle(t *testing.T, v api.Volume, typ, status string, result any) tasks.Effect {
	t.Helper()
	var taskID string
	if err := f.pool.QueryRow(context.Background(), `SELECT task_id FROM volumes WHERE id = $1`, v.ID).Scan(&taskID); err != nil {
		t.Fatal(err)
	}
	return f.settleTask(t, taskID, typ, status, result)
}

func (f *fixture) settleTask(t *testing.T, taskID, typ, status string, result any) tasks.Effect {
	t.Helper()
	raw, _ := json.Marshal(result)
	r := hostproto.TaskResult{NodeID: f.node.ID, TaskID: taskID, Status: status, Result: raw}
	if status != hostproto.TaskSucceeded {
		r.Error, r.Phase = "no space left", "volume_create"
	}
	var eff tasks.Effect
	err := f.in(t, func(tx pgx.Tx) error {
		var err error
		eff, err = volumes.Settlers()[typ](context.Background(), tx, tasks.Outcome{TaskID: taskID, NodeID: f.node.ID,
			Type: typ, Result: r, Now: f.now.Add(time.Second)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return eff
}

func (f *fixture) get(t *testing.T, ref string) api.Volume {
	t.Helper()
	v, err := volumes.Get(context.Background(), f.pool, f.project, ref)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (f *fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantCode(t *testing.T, err error, code api.Code) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != code {
		t.Fatalf("got %v; want %s", err, code)
	}
}
