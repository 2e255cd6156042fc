package workloads_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("workloads")

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a project of bob's with an active bare-metal allocation on a
// node, alice's project, and images in the states a workload is checked
// against.
type world struct {
	pool       *pgxpool.Pool
	bob, alice alloc.Actor
	project    string
	other      string // alice's project
	allocID    string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	w := &world{pool: pool, bob: alloc.Actor{UserID: ids.New(ids.User), Role: api.RoleUser},
		alice: alloc.Actor{UserID: ids.New(ids.User), Role: api.RoleUser}, project: ids.New(ids.Project), other: ids.New(ids.Project)}
	storetest.User(t, pool, w.bob.UserID, "bob@example.test", t0)
	storetest.User(t, pool, w.alice.UserID, "alice@example.test", t0)
	storetest.OwnedProject(t, pool, w.project, "proj", w.bob.UserID, t0)
	storetest.OwnedProject(t, pool, w.other, "other", w.alice.UserID, t0)
	storetest.Catalog(t, pool)
	storetest.Node(t, pool, "n-1", "n1", api.ShapeBaremetal, "H100")
	w.allocID = w.allocation(t, api.AllocActive, api.ShapeBaremetal)
	// Images: usable ones (the platform's, bob's project's own) and
	// ones no workload may run.
	w.image(t, "tiny", "", api.ImagePromoted, api.TrustVerified)
	w.image(t, "mine", w.project, api.ImagePromoted, api.TrustVerified)
	w.image(t, "theirs", w.other, api.ImagePromoted, api.TrustVerified)
	w.image(t, "fresh", "", api.ImagePublished, api.TrustUnverified)
	w.image(t, "unchecked", "", api.ImagePromoted, api.TrustUnverified)
	w.image(t, "bad", "", api.ImagePromoted, api.TrustRevoked)
	w.image(t, "old", "", api.ImageRetired, api.TrustVerified)
	return w
}

func (w *world) allocation(t *testing.T, state, shape string) string {
	t.Helper()
	sku := "h100-baremetal"
	if shape == api.ShapeGPUSlice {
		sku = "h200-slice"
	}
	a := storetest.Allocation(t, w.pool, api.Allocation{ProjectID: w.project, UserID: w.bob.UserID, SKU: sku,
		Shape: shape, GPUs: 8, State: state})
	storetest.OnNode(t, w.pool, a.ID, "n-1")
	return a.ID
}

func (w *world) image(t *testing.T, name, projectID, lifecycle, trust string) api.Image {
	t.Helper()
	ctx := context.Background()
	digest := "sha256:" + strings.Repeat(string(rune('a'+len(name)%6)), 64)
	img, err := images.Publish(ctx, w.pool, images.New{Name: name, ProjectID: projectID, Repository: "127.0.0.1:5000/test/" + name,
		Digest: digest, By: w.bob.UserID}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = images.Apply(ctx, w.pool, img.ID, images.Move{Lifecycle: lifecycle, Trust: trust}, "", t0); err != nil {
		t.Fatal(err)
	}
	return img
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

func (w *world) run(t *testing.T, actor alloc.Actor, req api.AppRunRequest) (api.Workload, error) {
	t.Helper()
	var wl api.Workload
	err := w.tx(t, func(tx pgx.Tx) error {
		var err error
		wl, _, err = workloads.Run(context.Background(), tx, actor, req, workloads.Config{}, t0)
		return err
	})
	return wl, err
}

// currentTask is the node task that follows the workload now, its type
// and params.
func (w *world) currentTask(t *testing.T, id string) (taskID, typ string, params json.RawMessage) {
	t.Helper()
	if err := w.pool.QueryRow(context.Background(), `SELECT t.id, t.type, t.params FROM workloads w JOIN node_tasks t ON t.id = w.task_id
		WHERE w.id = $1`, id).Scan(&taskID, &typ, &params); err != nil {
		t.Fatalf("task of %s: %v", id, err)
	}
	return taskID, typ, params
}

// settle applies a result of task taskID as controld/hosts would.
func (w *world) settle(t *testing.T, taskID, typ string, res hostproto.TaskResult) tasks.Effect {
	t.Helper()
	var eff tasks.Effect
	err := w.tx(t, func(tx pgx.Tx) error {
		var err error
		eff, err = workloads.Settlers(workloads.Config{})[typ](context.Background(), tx,
			tasks.Outcome{TaskID: taskID, NodeID: "n-1", Type: typ, Result: res, Now: t0.Add(time.Minute)})
		return err
	})
	if err != nil {
		t.Fatalf("settle %s: %v", typ, err)
	}
	return eff
}

func reported(t *testing.T, r hostproto.WorkloadReport) hostproto.TaskResult {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return hostproto.TaskResult{Status: hostproto.TaskSucceeded, Result: b}
}

func (w *world) get(t *testing.T, id string) api.Workload {
	t.Helper()
	wl, err := workloads.Get(context.Background(), w.pool, w.bob, id)
	if err != nil {
		t.Fatal(err)
	}
	return wl
}
