package alloc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// sliceOnNode inserts a node (a test node or not) whose slots have the
// GPU UUIDs uuids, and an allocation in provisioning holding them all.
func (f *fixture) sliceOnNode(t *testing.T, test bool, uuids ...string) api.Allocation {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	nodeID := ids.New(ids.Node)
	if _, err := f.pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at, test_node)
		VALUES ($1, $2, 'gpu_slice', 'H200', 'ready', $3, $3, $4)`, nodeID, "n-"+strings.ToLower(nodeID[len(nodeID)-6:]), now, test); err != nil {
		t.Fatal(err)
	}
	a := f.insertAlloc(t, api.AllocProvisioning, 1, false)
	a.GPUs = len(uuids)
	if _, err := f.pool.Exec(ctx, `UPDATE allocations SET node_id = $2, gpus = $3 WHERE id = $1`, a.ID, nodeID, len(uuids)); err != nil {
		t.Fatal(err)
	}
	for i, u := range uuids {
		if _, err := f.pool.Exec(ctx, `INSERT INTO slots (id, node_id, idx, gpu_pci, numa_node, state, allocation_id, gpu_uuid)
			VALUES ($1, $2, $3, $4, 0, 'reserved', $5, $6)`, ids.New(ids.Slot), nodeID, i, "0000:1"+string(rune('0'+i))+":00.0", a.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// settle applies a succeeded vm_provision whose result carries check
// (nil: a result without a driver check) through alloc's settler, in one
// transaction, as controld's task results do.
func (f *fixture) settle(t *testing.T, a api.Allocation, check *api.DriverCheck) {
	t.Helper()
	ctx := context.Background()
	raw, err := json.Marshal(hostproto.VMProvisionResult{Domain: a.ID, Address: "10.77.1.10:22", DriverCheck: check})
	if err != nil {
		t.Fatal(err)
	}
	settle := Settlers(nil)[api.TaskVMProvision]
	err = pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		_, err := settle(ctx, tx, tasks.Outcome{TaskID: ids.New("t"), AllocationID: a.ID, Type: api.TaskVMProvision,
			Result: hostproto.TaskResult{Status: hostproto.TaskSucceeded, Result: raw}, Now: time.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDriverCheckBeforeActive: a slice VM whose provisioning succeeded
// becomes active (and its meter starts) only when the guest listed
// exactly its slots' GPUs; every other case fails it with a reason naming
// the check, queues its cleanup release, and leaves no meter, usage or
// ledger entry.
func TestDriverCheckBeforeActive(t *testing.T) {
	f := newFixture(t)
	const u1, u2 = "GPU-11111111-2222-3333-4444-555555555555", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	ok := func(uuids ...string) *api.DriverCheck {
		return &api.DriverCheck{Passed: true, Message: "ok", UUIDs: uuids}
	}
	tests := []struct {
		name       string
		test       bool     // the node is a test node
		slots      []string // the slots' UUIDs
		check      *api.DriverCheck
		wantActive bool
		want       string // in the reason
	}{
		{"no driver check at all", false, []string{u1}, nil, false, "no driver check"},
		{"no driver", false, []string{u1}, &api.DriverCheck{Passed: false, Message: "expected 1 GPUs but nvidia-smi is not installed: no GPU driver"}, false, "no GPU driver"},
		{"forced failure", false, []string{u1}, &api.DriverCheck{Passed: false, Message: "driver check forced to fail by the seed"}, false, "forced to fail"},
		{"count mismatch", false, []string{u1, u2}, ok(u1), false, "GPU count mismatch: the guest lists 1"},
		{"no GPUs listed", false, []string{u1}, ok(), false, "GPU count mismatch: the guest lists 0 (none)"},
		{"UUID mismatch", false, []string{u1}, ok(u2), false, "GPU UUID mismatch"},
		{"inventory without a UUID", false, []string{""}, ok(u1), false, "no GPU UUID for slot 0"},
		{"simulated on a non-test node", false, []string{u1}, ok(api.SimGPUUUID(u1)), false, "simulated GPUs"},
		{"simulated mismatch on a test node", true, []string{u1}, ok(api.SimGPUUUID(u2)), false, "GPU UUID mismatch"},
		{"simulated on a test node", true, []string{u1}, ok(api.SimGPUUUID(u1)), true, "simulated, test node"},
		{"real GPUs, any order", false, []string{u1, u2}, ok(u2, u1), true, "driver check passed: 2 GPU(s)"},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := f.sliceOnNode(t, tc.test, tc.slots...)
			f.settle(t, a, tc.check)
			var state, reason string
			var meters, charges, ledger, cleanups int
			if err := f.pool.QueryRow(ctx, `SELECT state, reason,
				(SELECT count(*) FROM billing_meters WHERE allocation_id = $1),
				(SELECT count(*) FROM usage_charges WHERE allocation_id = $1),
				(SELECT count(*) FROM ledger_entries WHERE project_id = $2),
				(SELECT count(*) FROM node_tasks WHERE allocation_id = $1 AND type = $3)
				FROM allocations WHERE id = $1`, a.ID, f.project, api.TaskVMRelease).Scan(&state, &reason, &meters, &charges, &ledger, &cleanups); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(reason, tc.want) {
				t.Errorf("reason %q; want it to contain %q", reason, tc.want)
			}
			if tc.wantActive {
				if state != api.AllocActive || meters != 1 || cleanups != 0 {
					t.Errorf("state %s, %d meters, %d cleanups; want active, its meter, no cleanup", state, meters, cleanups)
				}
				return
			}
			if state != api.AllocFailed || !strings.HasPrefix(reason, ReasonDriverCheck) {
				t.Errorf("state %s (%q); want failed with a reason starting %q", state, reason, ReasonDriverCheck)
			}
			if meters != 0 || charges != 0 || ledger != 0 {
				t.Errorf("%d meters, %d usage charges, %d ledger entries; want none", meters, charges, ledger)
			}
			if cleanups != 1 {
				t.Errorf("%d cleanup releases queued; want 1", cleanups)
			}
		})
	}
}
