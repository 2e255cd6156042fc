package controld_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/faults"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

func (e *billingEnv) applyFault(t *testing.T, nodeID string, f hostproto.GPUFault) faults.Outcome {
	t.Helper()
	var out faults.Outcome
	err := pgx.BeginFunc(t.Context(), e.Server.Pool(), func(tx pgx.Tx) error {
		var err error
		out, err = faults.ApplyFault(t.Context(), tx, nodeID, f, e.clock.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGPUFaultQuarantinesNotifiesAndCredits: a GPU fault quarantines the
// slot, tells the allocation's project (alloc.notice) and operators
// (node.changed), credits exactly what was charged since the fault, stops
// the charging, keeps the ledger sound, and a repeated report changes
// nothing.
func TestGPUFaultQuarantinesNotifiesAndCredits(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	e.credit(t, 100_00)
	a := e.activate(t, c, "h200-slice", 2)
	e.clock.Advance(10*time.Minute + 20*time.Second)
	e.tick(t)
	faultAt := e.clock.Now().Add(-(5*time.Minute + 30*time.Second)) // mid-window
	before, _, err := billing.AllocationWindows(ctx, e.Server.Pool(), a.ID)
	if err != nil || len(before.Windows) == 0 {
		t.Fatalf("windows before the fault: %+v, %v", before, err)
	}
	var chargedBeforeFault int64
	for _, w := range before.Windows {
		if !w.End.After(faultAt) {
			chargedBeforeFault += w.AmountMinor
		}
	}
	e.clock.Advance(7 * time.Second) // the report comes a little later
	gpu := a.Slots[1].GPUPCI
	f := hostproto.GPUFault{NodeID: a.NodeID, GPU: gpu, XID: 79, At: faultAt,
		Message: "NVRM: Xid (PCI:" + gpu[:10] + "): 79, pid=1, name=python3, GPU has fallen off the bus."}
	events := count(t, e.Env, `SELECT count(*) FROM outbox_events`)
	out := e.applyFault(t, a.NodeID, f)
	if out.Duplicate || out.AllocationID != a.ID || out.Slot.Quarantine == nil || out.Slot.Quarantine.Reason != "xid 79" ||
		out.Slot.State != api.SlotReserved || out.Slot.AllocationID != a.ID {
		t.Fatalf("got %+v; want slot %s quarantined for xid 79, still reserved by %s", out, gpu, a.ID)
	}
	after, _, err := billing.AllocationUsage(ctx, e.Server.Pool(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := after.AmountMinor - chargedBeforeFault
	if !out.Credit.Booked || out.Credit.Entry.AmountMinor != want || want <= 0 || out.Credit.Entry.Kind != billing.KindAdjustment {
		t.Fatalf("credit %+v; want an adjustment of %d (charged %d, %d of it before the fault)",
			out.Credit, want, after.AmountMinor, chargedBeforeFault)
	}
	if after.StoppedAt == nil {
		t.Fatal("the meter still runs after the fault")
	}
	for _, s := range []string{a.ID, gpu, "79"} {
		if !strings.Contains(out.Credit.Entry.Memo, s) {
			t.Errorf("credit memo %q does not name %s", out.Credit.Entry.Memo, s)
		}
	}
	// Nothing is charged after the fault, however long it stays up.
	e.clock.Advance(30 * time.Minute)
	e.tick(t)
	if later, _, _ := billing.AllocationUsage(ctx, e.Server.Pool(), a.ID); later.AmountMinor != after.AmountMinor {
		t.Errorf("charged %d after the fault; want %d", later.AmountMinor, after.AmountMinor)
	}
	bal, err := billing.Balance(ctx, e.Server.Pool(), e.Project.ID)
	if err != nil || bal != 100_00-chargedBeforeFault {
		t.Errorf("balance %d (%v); want %d: the credit leaves only what came before the fault", bal, err, 100_00-chargedBeforeFault)
	}
	checks, err := billing.Verify(ctx, e.Server.Pool())
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range checks {
		if !ch.OK() {
			t.Errorf("ledger verify: %+v", ch)
		}
	}
	// The events: one alloc.notice for the project, one node.changed.
	rows, err := e.Server.Pool().Query(ctx, `SELECT kind, subject, users, payload FROM outbox_events ORDER BY id OFFSET $1`, events)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for rows.Next() {
		var kind, subject string
		var users []string
		var payload json.RawMessage
		if err := rows.Scan(&kind, &subject, &users, &payload); err != nil {
			t.Fatal(err)
		}
		kinds[kind]++
		if kind == api.EventAllocNotice {
			var n api.AllocNotice
			if err := json.Unmarshal(payload, &n); err != nil || n.Kind != api.NoticeQuarantine || n.AllocationID != a.ID ||
				subject != a.ID || !slices.Contains(users, e.Admin.ID) || !strings.Contains(n.Message, gpu) {
				t.Errorf("notice %s to %v: %s (%v); want a quarantine notice of %s to the admin", subject, users, payload, err, a.ID)
			}
		}
	}
	if kinds[api.EventAllocNotice] != 1 || kinds[api.EventNode] != 1 {
		t.Errorf("events %v; want one alloc.notice and one node.changed", kinds)
	}
	audits := count(t, e.Env, `SELECT count(*) FROM audit_logs WHERE action IN ('node.gpu_fault', 'billing.fault_credit')`)
	if audits != 2 {
		t.Errorf("%d audit rows; want node.gpu_fault and billing.fault_credit", audits)
	}
	// A resent report changes nothing.
	entries := count(t, e.Env, `SELECT count(*) FROM ledger_entries`)
	events = count(t, e.Env, `SELECT count(*) FROM outbox_events`)
	if again := e.applyFault(t, a.NodeID, f); !again.Duplicate {
		t.Errorf("resent report: got %+v; want a duplicate", again)
	}
	if n := count(t, e.Env, `SELECT count(*) FROM ledger_entries`); n != entries {
		t.Errorf("resent report booked %d entries", n-entries)
	}
	if n := count(t, e.Env, `SELECT count(*) FROM outbox_events`); n != events {
		t.Errorf("resent report enqueued %d events", n-events)
	}
}

// TestGPUFaultOnAFreeSlot quarantines it with no notice and no credit; a
// fault of a GPU the node has no slot of is not_found.
func TestGPUFaultOnAFreeSlot(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	d, err := e.Client(e.AdminToken).NodeGet(t.Context(), "sim-h200-1")
	if err != nil {
		t.Fatal(err)
	}
	out := e.applyFault(t, d.Node.ID, hostproto.GPUFault{GPU: d.Slots[3].GPUPCI, XID: 48, At: e.clock.Now()})
	if out.AllocationID != "" || out.Credit.Booked || out.Slot.Quarantine == nil || out.Slot.Index != 3 {
		t.Fatalf("got %+v; want slot 3 quarantined, nothing else", out)
	}
	err = pgx.BeginFunc(t.Context(), e.Server.Pool(), func(tx pgx.Tx) error {
		_, err := faults.ApplyFault(t.Context(), tx, d.Node.ID, hostproto.GPUFault{GPU: "0000:ff:00.0", XID: 79, At: e.clock.Now()}, e.clock.Now())
		return err
	})
	if !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("fault of an unknown GPU: got %v; want not found", err)
	}
}

// TestGPUFaultDuringProvisioningFailsIt: a GPU that fails while its
// allocation provisions makes the provisioning fail although hostd
// reports success, so the allocation is never active nor charged on it; a
// slot an operator quarantined does not.
func TestGPUFaultDuringProvisioningFailsIt(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	e.credit(t, 100_00)
	outcome := func(id string) (string, string) {
		t.Helper()
		var status, reason string
		err := pgx.BeginFunc(ctx, e.Server.Pool(), func(tx pgx.Tx) error {
			var err error
			status, reason, err = faults.ProvisionOutcome(ctx, tx, id, hostproto.TaskSucceeded, "")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return status, reason
	}
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NodeQuarantine(ctx, api.NodeQuarantineRequest{Node: a.NodeID, GPU: a.Slots[0].GPUPCI, Reason: "operator"}); err != nil {
		t.Fatal(err)
	}
	if status, _ := outcome(a.ID); status != hostproto.TaskSucceeded {
		t.Errorf("with an operator's quarantine: got %s; want succeeded", status)
	}
	e.applyFault(t, a.NodeID, hostproto.GPUFault{GPU: a.Slots[1].GPUPCI, XID: 79, At: e.clock.Now()})
	status, reason := outcome(a.ID)
	if status != hostproto.TaskFailed || !strings.Contains(reason, a.Slots[1].GPUPCI) || !strings.Contains(reason, "xid 79") {
		t.Errorf("after a GPU fault: got %s %q; want failed, naming the GPU and the XID", status, reason)
	}
}
