package node_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestQuarantineRefusals: a selector naming both or neither, a negative
// index, and an empty, multi-line or overlong reason are
// invalid_argument; a slot the node does not have is not_found. None
// changes a slot.
func TestQuarantineRefusals(t *testing.T) {
	pool := newPool(t)
	n := slicedNode(t, pool, "gpu-1", 2)
	one, neg, nine := 1, -1, 9
	for _, tc := range []struct {
		name   string
		sel    node.SlotSelector
		reason string
		want   api.Code
	}{
		{"both", node.SlotSelector{Index: &one, GPU: gpu(1)}, "bad", api.CodeInvalidArgument},
		{"neither", node.SlotSelector{}, "bad", api.CodeInvalidArgument},
		{"negative", node.SlotSelector{Index: &neg}, "bad", api.CodeInvalidArgument},
		{"no reason", node.SlotSelector{Index: &one}, "  ", api.CodeInvalidArgument},
		{"two lines", node.SlotSelector{Index: &one}, "bad\nworse", api.CodeInvalidArgument},
		{"overlong", node.SlotSelector{Index: &one}, strings.Repeat("é", 201), api.CodeInvalidArgument},
		{"no such index", node.SlotSelector{Index: &nine}, "bad", api.CodeNotFound},
		{"no such GPU", node.SlotSelector{GPU: "0000:ff:00.0"}, "bad", api.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := node.Quarantine(context.Background(), pool, n.ID, tc.sel, tc.reason, "u-op", t0)
			endpointtest.WantCode(t, tc.name, err, tc.want)
			if c := storetest.Count(t, pool, `SELECT count(*) FROM slots WHERE quarantined_at IS NOT NULL`); c != 0 {
				t.Errorf("quarantined slots after a refusal: got %d; want 0", c)
			}
		})
	}
}

// TestQuarantineKeepsASlotOutOfPlacement: a quarantined free slot is not
// offered to placement nor reservable; quarantining it again returns it
// unchanged (already, first reason kept); clearing it makes it placeable
// again; clearing what is not quarantined is a conflict.
func TestQuarantineKeepsASlotOutOfPlacement(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	n := slicedNode(t, pool, "gpu-1", 1)
	room := node.Room{Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: 1}
	candidates := func() int {
		c, err := node.NUMAGroupsWithRoom(ctx, pool, room, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(c)
	}
	if c := candidates(); c != 1 {
		t.Fatalf("candidates before quarantine: got %d; want 1", c)
	}
	slot, already, err := node.Quarantine(ctx, pool, n.ID, node.SlotSelector{GPU: gpu(0)}, " xid 79 ", node.HealthActor, t0)
	if err != nil || already || slot.Quarantine == nil || slot.Quarantine.Reason != "xid 79" {
		t.Fatalf("quarantine: got %+v, already %v, %v; want quarantined with reason \"xid 79\"", slot.Quarantine, already, err)
	}
	if c := candidates(); c != 0 {
		t.Errorf("candidates with the only slot quarantined: got %d; want 0", c)
	}
	err = inTx(pool, func(tx pgx.Tx) error {
		slots, ok, err := node.Reserve(ctx, tx, "a-none", node.Candidate{NodeID: n.ID, NUMA: 0}, 1)
		if ok || len(slots) != 0 {
			t.Errorf("reserve a quarantined slot: got %v, ok %v; want nothing", slots, ok)
		}
		return err
	})
	if err != nil {
		t.Fatalf("reserve a quarantined slot: %v", err)
	}
	idx := 0
	again, already, err := node.Quarantine(ctx, pool, n.ID, node.SlotSelector{Index: &idx}, "other", "u-op", t0)
	if err != nil || !already || again.Quarantine.Reason != "xid 79" || again.Quarantine.By != node.HealthActor {
		t.Errorf("quarantine again: got %+v, already %v, %v; want the first quarantine unchanged", again.Quarantine, already, err)
	}
	cleared, err := node.ClearQuarantine(ctx, pool, n.ID, node.SlotSelector{})
	if err != nil || len(cleared) != 1 || cleared[0].Quarantine != nil {
		t.Fatalf("clear: got %+v, %v; want the slot cleared", cleared, err)
	}
	if c := candidates(); c != 1 {
		t.Errorf("candidates after clearing: got %d; want 1", c)
	}
	_, err = node.ClearQuarantine(ctx, pool, n.ID, node.SlotSelector{})
	endpointtest.WantCode(t, "clear with nothing quarantined", err, api.CodeConflict)
	_, err = node.ClearQuarantine(ctx, pool, n.ID, node.SlotSelector{Index: &idx})
	endpointtest.WantCode(t, "clear a slot not quarantined", err, api.CodeConflict)
}

// TestApproveAndDrain: naming a slot that is not pending is
// invalid_argument and, in the mutation's transaction, approves nothing; a draining node offers no room and
// draining it again is a conflict.
func TestApproveAndDrain(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	created, err := node.Register(ctx, pool, node.Spec{Name: "gpu-1", Shape: api.ShapeGPUSlice, GPUModel: "H200",
		Slots: []node.SlotSpec{{GPUPCI: gpu(0)}, {GPUPCI: gpu(1)}}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = node.Register(ctx, pool, node.Spec{Name: "gpu-1", Shape: api.ShapeGPUSlice}, t0)
	endpointtest.WantCode(t, "register a taken name", err, api.CodeConflict)
	_, err = node.Register(ctx, pool, node.Spec{Name: "gpu-9", Shape: "container"}, t0)
	endpointtest.WantCode(t, "register an unknown shape", err, api.CodeInvalidArgument)
	slots, err := node.Slots(ctx, pool, `node_id = $1`, created.ID)
	if err != nil || len(slots) != 2 {
		t.Fatalf("slots: got %d, %v; want 2", len(slots), err)
	}
	// In the mutation's transaction, as node.approve runs it: the refusal
	// rolls back the slot it did approve.
	err = inTx(pool, func(tx pgx.Tx) error {
		_, err := node.ApproveSlots(ctx, tx, created.ID, []string{slots[0].ID, "s-nope"})
		return err
	})
	endpointtest.WantCode(t, "approve a slot that is not pending", err, api.CodeInvalidArgument)
	if c := storetest.Count(t, pool, `SELECT count(*) FROM slots WHERE state = 'free'`); c != 0 {
		t.Errorf("free slots after a refused approval: got %d; want 0", c)
	}
	if got, err := node.ApproveSlots(ctx, pool, created.ID, []string{slots[0].ID}); err != nil || got != 1 {
		t.Errorf("approve one: got %d, %v; want 1", got, err)
	}
	room := node.Room{Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: 1}
	if c, _ := node.NUMAGroupsWithRoom(ctx, pool, room, 10, 0); len(c) != 1 {
		t.Errorf("candidates of a ready node: got %d; want 1", len(c))
	}
	if err := node.Drain(ctx, pool, created.ID, t0); err != nil {
		t.Fatal(err)
	}
	if c, _ := node.NUMAGroupsWithRoom(ctx, pool, room, 10, 0); len(c) != 0 {
		t.Errorf("candidates of a draining node: got %d; want 0", len(c))
	}
	endpointtest.WantCode(t, "drain again", node.Drain(ctx, pool, created.ID, t0), api.CodeConflict)
}
