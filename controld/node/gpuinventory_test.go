package node_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestDiscoveryRecordsGPUUUIDs: topology discovery stores each slot's
// GPU UUID; an approved slot without one gets it at the next discovery
// (a node discovered before the inventory knew UUIDs), one that has one
// keeps it (a swapped GPU must fail the driver check, not pass it), and
// rediscovering an approved slot adds no second slot for its GPU.
// (InventoryOf is exercised by controld/alloc's TestDriverCheckBeforeActive.)
func TestDiscoveryRecordsGPUUUIDs(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	n := slicedNode(t, pool, "gpu-1", 2) // approved, no UUIDs
	const u0, u1, swapped = "GPU-00000000-0000-0000-0000-000000000000", "GPU-11111111-1111-1111-1111-111111111111", "GPU-55555555-5555-5555-5555-555555555555"
	discover := func(uuids ...string) {
		t.Helper()
		r := api.TopologyResult{}
		for i, u := range uuids {
			r.CandidateSlots = append(r.CandidateSlots, api.CandidateSlot{Index: i, GPUPCI: gpu(i), GPUUUID: u})
		}
		if err := node.ApplyDiscovery(ctx, pool, n.ID, r, false, t0); err != nil {
			t.Fatal(err)
		}
	}
	uuids := func() []string {
		t.Helper()
		slots, err := node.Slots(ctx, pool, `node_id=$1`, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range slots {
			out = append(out, s.GPUUUID)
		}
		return out
	}
	discover(u0, u1)
	if got := uuids(); len(got) != 2 || got[0] != u0 || got[1] != u1 {
		t.Fatalf("after discovery the slots' UUIDs are %q; want [%s %s] (and no added slot)", got, u0, u1)
	}
	discover(swapped, u1)
	if got := uuids(); len(got) != 2 || got[0] != u0 {
		t.Errorf("after a second discovery the slots' UUIDs are %q; want slot 0 to keep %s", got, u0)
	}

	// A pending slot takes what discovery says.
	discover(u0, u1, swapped)
	if got := uuids(); len(got) != 3 || got[2] != swapped {
		t.Errorf("a new GPU's pending slot has UUIDs %q; want %s last", got, swapped)
	}
}

// TestEnrollTestNode: a token made with Test enrolls a test node (whose
// slices may report simulated GPUs); one made without does not. The
// token's audit says which.
func TestEnrollTestNode(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	for _, test := range []bool{false, true} {
		name := map[bool]string{false: "gpu-real", true: "gpu-test"}[test]
		var tok api.EnrollTokenResponse
		if err := inTx(pool, func(tx pgx.Tx) error {
			r, e, err := node.CreateEnrollToken(ctx, tx, api.EnrollTokenRequest{Name: name, Test: test}, "u-op", t0)
			if err == nil && e.Audit.Detail.(map[string]string)["test"] != map[bool]string{false: "false", true: "true"}[test] {
				t.Errorf("audit detail %v; want test=%v", e.Audit.Detail, test)
			}
			tok = r
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var enrolled node.Enrolled
		if err := inTx(pool, func(tx pgx.Tx) error {
			var err error
			enrolled, err = node.Enroll(ctx, tx, hostproto.EnrollRequest{Token: tok.Token, PublicKey: []byte("pk-" + name)}, "", t0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var got bool
		if err := pool.QueryRow(ctx, `SELECT test_node FROM nodes WHERE id = $1`, enrolled.ID).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != test {
			t.Errorf("node %s enrolled with Test=%v: test_node = %v", name, test, got)
		}
	}
}
