package jobs_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("jobs")

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a project of bob's with an active bare-metal allocation on a
// node, and alice, who is no member.
type world struct {
	pool       *pgxpool.Pool
	bob, alice alloc.Actor
	project    string
	allocID    string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	w := &world{pool: pool, bob: alloc.Actor{UserID: ids.New(ids.User), Role: api.RoleUser},
		alice: alloc.Actor{UserID: ids.New(ids.User), Role: api.RoleUser}, project: ids.New(ids.Project)}
	storetest.User(t, pool, w.bob.UserID, "bob@example.test", t0)
	storetest.User(t, pool, w.alice.UserID, "alice@example.test", t0)
	storetest.OwnedProject(t, pool, w.project, "proj", w.bob.UserID, t0)
	storetest.Catalog(t, pool)
	storetest.Node(t, pool, "n-1", "n1", api.ShapeBaremetal, "H100")
	w.allocID = w.allocation(t, api.AllocActive)
	return w
}

func (w *world) allocation(t *testing.T, state string) string {
	t.Helper()
	a := storetest.Allocation(t, w.pool, api.Allocation{ProjectID: w.project, UserID: w.bob.UserID, SKU: "h100-baremetal",
		Shape: api.ShapeBaremetal, GPUs: 8, State: state})
	storetest.OnNode(t, w.pool, a.ID, "n-1")
	return a.ID
}

func (w *world) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return storetest.Count(t, w.pool, sql, args...)
}

// tx runs fn in a transaction that commits when fn returns no error.
func (w *world) tx(t *testing.T, fn func(tx pgx.Tx) error) error {
	t.Helper()
	return storetest.InTx(t, w.pool, fn)
}

func (w *world) create(t *testing.T, req api.JobCreateRequest) (api.Job, error) {
	t.Helper()
	var j api.Job
	err := w.tx(t, func(tx pgx.Tx) error {
		var err error
		j, _, err = jobs.Create(context.Background(), tx, w.bob, req, jobs.Config{}, t0)
		return err
	})
	return j, err
}

// currentTask is the node task that follows the job now, and its type.
func (w *world) currentTask(t *testing.T, jobID string) (id, typ string) {
	t.Helper()
	if err := w.pool.QueryRow(context.Background(), `SELECT t.id, t.type FROM jobs j JOIN node_tasks t ON t.id = j.task_id
		WHERE j.id = $1`, jobID).Scan(&id, &typ); err != nil {
		t.Fatalf("task of %s: %v", jobID, err)
	}
	return id, typ
}

// settle applies a result of task taskID as controld/hosts would.
func (w *world) settle(t *testing.T, taskID, typ string, res hostproto.TaskResult) tasks.Effect {
	t.Helper()
	var eff tasks.Effect
	err := w.tx(t, func(tx pgx.Tx) error {
		var err error
		eff, err = jobs.Settlers(jobs.Config{})[typ](context.Background(), tx,
			tasks.Outcome{TaskID: taskID, NodeID: "n-1", Type: typ, Result: res, Now: t0.Add(time.Minute)})
		return err
	})
	if err != nil {
		t.Fatalf("settle %s: %v", typ, err)
	}
	return eff
}

func reported(t *testing.T, r hostproto.JobReport) hostproto.TaskResult {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return hostproto.TaskResult{Status: hostproto.TaskSucceeded, Result: b}
}
