package sched_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/sched"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("sched", store.Migrate)

// db is a test database with a user and project, so that allocation rows
// can exist.
type db struct {
	pool    *pgxpool.Pool
	userID  string
	project string
}

func newDB(t *testing.T) *db {
	t.Helper()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 40)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d := &db{pool: pool, userID: ids.New(ids.User), project: ids.New(ids.Project)}
	now := time.Now().UTC()
	storetest.User(t, pool, d.userID, "sched@example.test", now)
	storetest.Project(t, pool, d.project, "proj", d.userID, now)
	if err := catalog.Seed(ctx, pool, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	return d
}

// querier is a pool or a transaction: fleets of table cases live in a
// transaction that is rolled back, so the cases share one database.
type querier interface {
	store.Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// fleet is a set of nodes, by name, in a test database.
type fleet struct {
	*db
	q      querier
	nodeID map[string]string // name → id
	name   map[string]string // id → name
	// filler holds the slots a test marks as used.
	filler string
}

// nodeSetup describes one node of a test fleet. Slots are approved (free)
// unless listed in pending or disabled; used reserves that many slots of
// a NUMA node (lowest index first) for another allocation.
type nodeSetup struct {
	name     string
	shape    string // default gpu_slice
	model    string // default H200
	numa     []int  // NUMA node of each slot; default 4 on NUMA 0, 4 on NUMA 1
	state    string // default ready
	used     map[int]int
	pending  []int
	disabled []int
}

// newFleet is a fresh database holding nodes.
func newFleet(t *testing.T, nodes ...nodeSetup) *fleet {
	t.Helper()
	d := newDB(t)
	return d.fleet(t, d.pool, nodes...)
}

// fleet adds nodes through q.
func (d *db) fleet(t *testing.T, q querier, nodes ...nodeSetup) *fleet {
	t.Helper()
	f := &fleet{db: d, q: q, nodeID: map[string]string{}, name: map[string]string{}}
	f.filler = f.newAlloc(t)
	for _, n := range nodes {
		f.addNode(t, n)
	}
	return f
}

func (f *fleet) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := f.q.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (f *fleet) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.q.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (f *fleet) addNode(t *testing.T, n nodeSetup) {
	t.Helper()
	ctx := context.Background()
	spec := node.Spec{Name: n.name, Shape: n.shape, GPUModel: n.model}
	if spec.Shape == "" {
		spec.Shape = api.ShapeGPUSlice
	}
	if spec.GPUModel == "" {
		spec.GPUModel = "H200"
	}
	numa := n.numa
	if numa == nil {
		numa = []int{0, 0, 0, 0, 1, 1, 1, 1}
	}
	for i, nn := range numa {
		spec.Slots = append(spec.Slots, node.SlotSpec{GPUPCI: fmt.Sprintf("0000:%02x:00.0", 0x18+i), NUMANode: nn})
	}
	created, err := node.Register(ctx, f.q, spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f.nodeID[n.name], f.name[created.ID] = created.ID, n.name
	f.exec(t, `UPDATE slots SET state = 'free' WHERE node_id = $1 AND NOT idx = ANY($2)`, created.ID, append([]int{}, n.pending...))
	f.exec(t, `UPDATE slots SET state = 'disabled' WHERE node_id = $1 AND idx = ANY($2)`, created.ID, n.disabled)
	for numaNode, k := range n.used {
		f.exec(t, `UPDATE slots SET state = 'reserved', allocation_id = $3 WHERE id IN (
			SELECT id FROM slots WHERE node_id = $1 AND numa_node = $2 AND state = 'free' ORDER BY idx LIMIT $4)`,
			created.ID, numaNode, f.filler, k)
	}
	if n.state != "" {
		f.exec(t, `UPDATE nodes SET state = $2 WHERE id = $1`, created.ID, n.state)
	}
}

// newAlloc inserts a requested allocation for slots to point at.
func (f *fleet) newAlloc(t testing.TB) string {
	t.Helper()
	return storetest.Allocation(t, f.q, api.Allocation{ProjectID: f.project, UserID: f.userID, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1}).ID
}

// place runs sched.Place for a new allocation in a (sub)transaction of
// its own, committed on success.
func (f *fleet) place(t *testing.T, shape, model string, gpus int) (sched.Request, sched.Placement, error) {
	t.Helper()
	r := sched.Request{AllocationID: f.newAlloc(t), Shape: shape, GPUModel: model, GPUs: gpus}
	var p sched.Placement
	err := pgx.BeginFunc(context.Background(), f.q, func(tx pgx.Tx) error {
		var err error
		p, err = sched.Place(context.Background(), tx, r)
		return err
	})
	return r, p, err
}

// numaCounts is how many of slots sit on each NUMA node.
func numaCounts(slots []api.Slot) map[int]int {
	out := map[int]int{}
	for _, s := range slots {
		out[s.NUMANode]++
	}
	return out
}

// freePerNUMA is a node's free slots per NUMA node, in NUMA order.
func (f *fleet) freePerNUMA(t *testing.T, nodeName string) []int {
	t.Helper()
	rows, err := f.q.Query(context.Background(), `SELECT count(*) FILTER (WHERE state = 'free')
		FROM slots WHERE node_id = $1 GROUP BY numa_node ORDER BY numa_node`, f.nodeID[nodeName])
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkReserved verifies that the database holds exactly the placement's
// slots for the allocation, all reserved, all on the placement's node.
func (f *fleet) checkReserved(t *testing.T, r sched.Request, p sched.Placement) {
	t.Helper()
	slots, err := node.Slots(context.Background(), f.q, `allocation_id = $1`, r.AllocationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != r.GPUs {
		t.Fatalf("reserved slots got %d; want %d", len(slots), r.GPUs)
	}
	want := make([]string, len(p.Slots))
	for i, s := range p.Slots {
		want[i] = s.ID
	}
	got := make([]string, len(slots))
	for i, s := range slots {
		got[i] = s.ID
		if s.State != api.SlotReserved || s.NodeID != p.NodeID {
			t.Errorf("slot %s got state %s on %s; want reserved on %s", s.ID, s.State, s.NodeID, p.NodeID)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("reserved slots got %v; want the placement's %v", got, want)
	}
}
