package faults_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/faults"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

func (e *env) apply(t *testing.T, f hostproto.GPUFault, now time.Time) (faults.Outcome, error) {
	t.Helper()
	var out faults.Outcome
	err := e.inTx(func(tx pgx.Tx) error {
		var err error
		out, err = faults.ApplyFault(context.Background(), tx, e.nodeID, f, now)
		return err
	})
	return out, err
}

// TestFaultOnAllocatedGPU: in the transaction that records it, a fault
// of a GPU an allocation holds quarantines that slot (by system:health,
// reason "xid 79"), tells the allocation's members (alloc.notice of kind
// quarantine) and operators (node event), and writes its audit row; a
// repeated report does nothing at all.
func TestFaultOnAllocatedGPU(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f := hostproto.GPUFault{GPU: gpu(1), XID: 79, At: t0.Add(-time.Minute), Message: "fallen off the bus"}
	out, err := e.apply(t, f, t0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Duplicate || out.AllocationID != e.alloc || out.Slot.Index != 1 || out.Slot.Quarantine == nil ||
		out.Slot.Quarantine.Reason != "xid 79" || out.Slot.Quarantine.By != node.HealthActor || out.Credit.Booked {
		t.Errorf("outcome: got %+v; want slot 1 of %s quarantined for xid 79 by %s, nothing credited (never metered)",
			out, e.alloc, node.HealthActor)
	}
	if got, want := e.rows(t), (rows{faults: 1, quarantined: 1, audit: 1, events: 2}); got != want {
		t.Errorf("rows: got %+v; want %+v", got, want)
	}
	var notice api.AllocNotice
	var users []string
	if err := e.pool.QueryRow(ctx, `SELECT payload, users FROM outbox_events WHERE kind = $1 AND subject = $2`,
		api.EventAllocNotice, e.alloc).Scan(&notice, &users); err != nil {
		t.Fatal(err)
	}
	if notice.Kind != api.NoticeQuarantine || !strings.Contains(notice.Message, gpu(1)) || !strings.Contains(notice.Message, "XID 79") ||
		len(users) != 1 || users[0] != e.user {
		t.Errorf("notice: got %+v to %v; want a quarantine notice naming %s and XID 79 to %s", notice, users, gpu(1), e.user)
	}
	if n := countWhere(t, e, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND subject = $2`, api.EventNode, e.nodeID); n != 1 {
		t.Errorf("node events: got %d; want 1", n)
	}
	var detail map[string]any
	if err := e.pool.QueryRow(ctx, `SELECT detail FROM audit_logs WHERE action = 'node.gpu_fault' AND target_id = $1 AND actor_id = $2`,
		e.nodeID, faults.Actor).Scan(&detail); err != nil {
		t.Fatalf("audit row: %v", err)
	}
	if detail["xid"] != float64(79) || detail["allocation"] != e.alloc || detail["gpu"] != gpu(1) {
		t.Errorf("audit detail: got %v; want xid 79, allocation %s, gpu %s", detail, e.alloc, gpu(1))
	}
	before := e.rows(t)
	again, err := e.apply(t, f, t0.Add(time.Minute))
	if err != nil || !again.Duplicate {
		t.Errorf("repeated report: got %+v, %v; want a duplicate", again, err)
	}
	if after := e.rows(t); after != before {
		t.Errorf("rows after a repeated report: got %+v; want %+v unchanged", after, before)
	}
}

// TestFaultOnFreeGPUAndUnknownGPU: an ECC fault of a free GPU
// quarantines it with only the node event and the audit row; a GPU the
// node has no slot of is not_found and writes nothing.
func TestFaultOnFreeGPUAndUnknownGPU(t *testing.T) {
	e := newEnv(t)
	out, err := e.apply(t, hostproto.GPUFault{GPU: gpu(3), FaultKind: hostproto.GPUFaultECC, ECCUncorrected: 3, At: t0}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if out.AllocationID != "" || out.Slot.Quarantine == nil || out.Slot.Quarantine.Reason != "ecc uncorrected 3" {
		t.Errorf("outcome: got %+v; want slot 3 quarantined for ecc uncorrected 3, no allocation", out)
	}
	if got, want := e.rows(t), (rows{faults: 1, quarantined: 1, audit: 1, events: 1}); got != want {
		t.Errorf("rows: got %+v; want %+v", got, want)
	}
	_, err = e.apply(t, hostproto.GPUFault{GPU: "0000:ff:00.0", XID: 48, At: t0}, t0)
	endpointtest.WantCode(t, "fault of a GPU without a slot", err, api.CodeNotFound)
	if got, want := e.rows(t), (rows{faults: 1, quarantined: 1, audit: 1, events: 1}); got != want {
		t.Errorf("rows after the refusal: got %+v; want %+v unchanged", got, want)
	}
}

// TestProvisionVerdict: a provisioning whose pre-handout check failed
// quarantines the GPUs it names that the node has (once each), with one
// audit row and a node event; a provisioning that succeeded on a slot
// quarantined for a GPU fault meanwhile fails, naming the GPU; one whose
// slot an operator quarantined stands.
func TestProvisionVerdict(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	verdict := func(r hostproto.TaskResult) (string, string, int) {
		t.Helper()
		var status, reason string
		var events int
		err := e.inTx(func(tx pgx.Tx) error {
			s, re, ev, err := faults.ProvisionVerdict(ctx, tx, tasks.Outcome{NodeID: e.nodeID, AllocationID: e.alloc,
				Type: api.TaskVMProvision, Result: r, Now: t0})
			status, reason, events = s, re, len(ev)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return status, reason, events
	}
	check, _ := json.Marshal(api.GPUCheckResult{FailedGPUs: []string{gpu(0), "0000:ff:00.0"}, Reason: "gpu check failed: ecc"})
	failed := hostproto.TaskResult{Status: hostproto.TaskFailed, Phase: api.PhaseGPUCheck, Error: "ecc", Result: check}
	status, reason, events := verdict(failed)
	if status != hostproto.TaskFailed || reason != api.PhaseGPUCheck+": ecc" || events != 1 {
		t.Errorf("failed check: got %s %q, %d events; want failed, its reason, one node event", status, reason, events)
	}
	slots, err := node.Slots(ctx, e.pool, `quarantined_at IS NOT NULL`)
	if err != nil || len(slots) != 1 || slots[0].GPUPCI != gpu(0) || slots[0].Quarantine.Reason != "gpu check failed: ecc" {
		t.Fatalf("quarantined after the failed check: got %+v, %v; want GPU 0 for its reason", slots, err)
	}
	if n := countWhere(t, e, `SELECT count(*) FROM audit_logs WHERE action = 'node.quarantine'`); n != 1 {
		t.Errorf("audit rows: got %d; want 1", n)
	}
	// The same report again: nothing more is quarantined, nothing written.
	if _, _, events := verdict(failed); events != 0 {
		t.Errorf("repeated failed check: got %d events; want 0", events)
	}
	if n := countWhere(t, e, `SELECT count(*) FROM audit_logs`); n != 1 {
		t.Errorf("audit rows after the repeat: got %d; want 1", n)
	}
	// GPU 0 was quarantined by the check (system:health): a success on it fails.
	ok := hostproto.TaskResult{Status: hostproto.TaskSucceeded}
	status, reason, _ = verdict(ok)
	if status != hostproto.TaskFailed || !strings.Contains(reason, gpu(0)) || !strings.HasPrefix(reason, api.PhaseGPUCheck+": ") {
		t.Errorf("success on a faulted GPU: got %s %q; want failed naming %s", status, reason, gpu(0))
	}
	// An operator's quarantine is not a fault: the success stands.
	if _, err := node.ClearQuarantine(ctx, e.pool, e.nodeID, node.SlotSelector{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := node.Quarantine(ctx, e.pool, e.nodeID, node.SlotSelector{GPU: gpu(0)}, "maintenance", "u-op", t0); err != nil {
		t.Fatal(err)
	}
	if status, reason, _ = verdict(ok); status != hostproto.TaskSucceeded || reason != "" {
		t.Errorf("success on an operator-quarantined GPU: got %s %q; want succeeded", status, reason)
	}
}

func countWhere(t *testing.T, e *env, sql string, args ...any) int {
	t.Helper()
	return storetest.Count(t, e.pool, sql, args...)
}
