package controld_test

import (
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func intp(i int) *int { return &i }

// freeCount is the free count placement reads for a node (slot_groups'
// node row with its pending deltas).
func freeCount(t *testing.T, env *controldtest.Env, nodeID string) int {
	t.Helper()
	return count(t, env, `SELECT g.free + coalesce((SELECT sum(d.free) FROM slot_group_deltas d
		WHERE d.node_id = g.node_id AND d.numa_node = -1), 0) FROM slot_groups g WHERE g.node_id = $1 AND g.numa_node = -1`, nodeID)
}

// TestQuarantineValidationAndPermissions: only operators quarantine and
// clear; bad requests change nothing.
func TestQuarantineValidationAndPermissions(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	bob := env.Client(bobToken)
	_, olgaToken := env.AddUser(t, "olga@example.test", api.RoleOperator)
	operator := env.Client(olgaToken)
	const node = "sim-h100-1"
	if _, err := admin.NodeGet(ctx, node); err != nil {
		t.Fatalf("the seeded bare-metal node: %v", err)
	}
	bad := []struct {
		name string
		c    *api.Client
		req  api.NodeQuarantineRequest
		want error
	}{
		{"by a user", bob, api.NodeQuarantineRequest{Node: node, Slot: intp(0), Reason: "x"}, api.ErrForbidden},
		{"no reason", admin, api.NodeQuarantineRequest{Node: node, Slot: intp(0)}, api.ErrInvalidArgument},
		{"blank reason", admin, api.NodeQuarantineRequest{Node: node, Slot: intp(0), Reason: "  "}, api.ErrInvalidArgument},
		{"two lines", admin, api.NodeQuarantineRequest{Node: node, Slot: intp(0), Reason: "a\nb"}, api.ErrInvalidArgument},
		{"no slot", admin, api.NodeQuarantineRequest{Node: node, Reason: "x"}, api.ErrInvalidArgument},
		{"slot and gpu", admin, api.NodeQuarantineRequest{Node: node, Slot: intp(0), GPU: "0000:18:00.0", Reason: "x"}, api.ErrInvalidArgument},
		{"negative slot", admin, api.NodeQuarantineRequest{Node: node, Slot: intp(-1), Reason: "x"}, api.ErrInvalidArgument},
		{"unknown slot", admin, api.NodeQuarantineRequest{Node: node, Slot: intp(99), Reason: "x"}, api.ErrNotFound},
		{"unknown gpu", admin, api.NodeQuarantineRequest{Node: node, GPU: "0000:ff:00.0", Reason: "x"}, api.ErrNotFound},
		{"unknown node", admin, api.NodeQuarantineRequest{Node: "ghost", Slot: intp(0), Reason: "x"}, api.ErrNotFound},
	}
	for _, tt := range bad {
		if _, err := tt.c.NodeQuarantine(ctx, tt.req); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v; want %v", tt.name, err, tt.want)
		}
	}
	if n := count(t, env, `SELECT count(*) FROM slots WHERE quarantined_at IS NOT NULL`); n != 0 {
		t.Fatalf("refused requests quarantined %d slots; want 0", n)
	}
	if _, err := admin.NodeClear(ctx, api.NodeClearRequest{Node: node}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("clear with nothing quarantined: got %v; want conflict", err)
	}
	d, err := operator.NodeQuarantine(ctx, api.NodeQuarantineRequest{Node: node, Slot: intp(2), Reason: "fan noise"})
	if err != nil {
		t.Fatalf("operator quarantine: %v", err)
	}
	if q := d.Slots[2].Quarantine; q == nil || q.Reason != "fan noise" || q.By == "" || d.Node.SlotsQuarantined != 1 {
		t.Fatalf("got slot 2 quarantine %+v, %d quarantined; want fan noise by olga, 1", q, d.Node.SlotsQuarantined)
	}
	if _, err := admin.NodeQuarantine(ctx, api.NodeQuarantineRequest{Node: node, GPU: d.Slots[2].GPUPCI, Reason: "again"}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("quarantine twice: got %v; want conflict", err)
	}
	if _, err := bob.NodeClear(ctx, api.NodeClearRequest{Node: node}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("clear by a user: got %v; want forbidden", err)
	}
	if _, err := admin.NodeClear(ctx, api.NodeClearRequest{Node: node, Slot: intp(1)}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("clear a slot not quarantined: got %v; want conflict", err)
	}
	if _, err := admin.NodeClear(ctx, api.NodeClearRequest{Node: node, Slot: intp(1), GPU: "x"}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("clear by slot and gpu: got %v; want invalid argument", err)
	}
	list, err := admin.NodeList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Nodes {
		if want := map[bool]int{true: 1, false: 0}[n.Name == node]; n.SlotsQuarantined != want {
			t.Errorf("node list: %s has %d quarantined; want %d", n.Name, n.SlotsQuarantined, want)
		}
	}
}

// TestPlacementAvoidsQuarantinedSlot: a quarantined free slot is never
// handed out and leaves the free counts, a quarantined reserved slot stays
// its allocation's, and clearing makes the slot placeable again.
func TestPlacementAvoidsQuarantinedSlot(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	bm, err := admin.NodeGet(ctx, "sim-h100-1")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := admin.NodeGet(ctx, "sim-h200-1")
	if err != nil {
		t.Fatal(err)
	}
	// Bare metal: one quarantined slot and the node is not wholly free.
	if _, err := admin.NodeQuarantine(ctx, api.NodeQuarantineRequest{Node: bm.Node.Name, Slot: intp(5), Reason: "ecc"}); err != nil {
		t.Fatal(err)
	}
	if got := freeCount(t, env, bm.Node.ID); got != 7 {
		t.Errorf("bare-metal free count with one quarantined: got %d; want 7", got)
	}
	if _, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("bare metal with a quarantined slot: got %v; want no capacity", err)
	}
	// Slices: 8 GPUs do not fit around a quarantined one; 4 do, elsewhere.
	if _, err := admin.NodeQuarantine(ctx, api.NodeQuarantineRequest{Node: sl.Node.Name, GPU: sl.Slots[0].GPUPCI, Reason: "xid 79"}); err != nil {
		t.Fatal(err)
	}
	if got := freeCount(t, env, sl.Node.ID); got != 7 {
		t.Errorf("slice free count with one quarantined: got %d; want 7", got)
	}
	if _, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 8}); !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("8 slices with a quarantined slot: got %v; want no capacity", err)
	}
	var allocs []*api.Allocation
	for _, gpus := range []int{4, 2, 1} { // the 7 free
		a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: gpus})
		if err != nil {
			t.Fatalf("%d slices: %v", gpus, err)
		}
		for _, s := range a.Slots {
			if s.Index == 0 {
				t.Fatalf("allocation %s got the quarantined slot", a.ID)
			}
		}
		allocs = append(allocs, a)
	}
	if _, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}); !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("a slice with only the quarantined slot left: got %v; want no capacity", err)
	}
	// A reserved slot quarantined stays its allocation's.
	held := allocs[0].Slots[0]
	d, err := admin.NodeQuarantine(ctx, api.NodeQuarantineRequest{Node: sl.Node.Name, Slot: intp(held.Index), Reason: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Slots[held.Index]; got.State != api.SlotReserved || got.AllocationID != allocs[0].ID || got.Quarantine == nil {
		t.Fatalf("quarantined reserved slot: got %+v; want reserved by %s, quarantined", got, allocs[0].ID)
	}
	if got := freeCount(t, env, sl.Node.ID); got != 0 {
		t.Errorf("slice free count: got %d; want 0", got)
	}
	// Clearing slot 0 makes it placeable (and counted) again.
	if _, err := admin.NodeClear(ctx, api.NodeClearRequest{Node: sl.Node.Name, Slot: intp(0)}); err != nil {
		t.Fatal(err)
	}
	if got := freeCount(t, env, sl.Node.ID); got != 1 {
		t.Errorf("slice free count after clear: got %d; want 1", got)
	}
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil || a.Slots[0].Index != 0 {
		t.Fatalf("after clear: got %+v, %v; want slot 0", a, err)
	}
	if _, err := admin.NodeClear(ctx, api.NodeClearRequest{Node: bm.Node.Name}); err != nil {
		t.Fatal(err)
	}
	if got := freeCount(t, env, bm.Node.ID); got != 8 {
		t.Errorf("bare-metal free count after clear: got %d; want 8", got)
	}
	if _, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); err != nil {
		t.Fatalf("bare metal after clear: %v", err)
	}
}
