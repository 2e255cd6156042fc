// Package faults decides what a GPU fault means (docs/gpu-telemetry.md): when
// hostd reports an XID or an increase of the uncorrected ECC count of a
// GPU, the GPU's slot is quarantined, the allocation holding it is told
// (alloc.notice) and credited what it was charged since the fault, and its
// meter stops — all in the transaction that records the fault, with an
// audit row and outbox events like every mutation. It owns no table: it
// asks controld/node, controld/alloc and controld/billing.
package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Actor is who acts on GPU faults.
const Actor = node.HealthActor

// Outcome is what ApplyFault did.
type Outcome struct {
	// Duplicate: the fault was applied before; nothing was done.
	Duplicate bool
	Slot      api.Slot
	// AllocationID is the allocation holding the slot ("" for none).
	AllocationID string
	Credit       billing.FaultCredit
}

// ApplyFault applies a GPU fault node nodeID reported, in tx, once per
// fault: it records it, quarantines the GPU's slot (reason "xid <code>",
// or "ecc uncorrected <count>" for an ECC fault),
// and, when an allocation holds the slot, tells its project members and
// credits it (billing.CreditFault). A GPU the node has no slot of is
// not_found.
func ApplyFault(ctx context.Context, tx pgx.Tx, nodeID string, f hostproto.GPUFault, now time.Time) (Outcome, error) {
	now = now.UTC()
	slot, found, err := node.SlotByGPU(ctx, tx, nodeID, f.GPU)
	if err != nil {
		return Outcome{}, err
	}
	if !found {
		return Outcome{}, api.Errorf(api.CodeNotFound, "node %s has no slot with GPU %s", nodeID, f.GPU)
	}
	inserted, err := node.RecordFault(ctx, tx, nodeID, f, slot.AllocationID, now)
	if err != nil || !inserted {
		return Outcome{Duplicate: err == nil}, err
	}
	out := Outcome{AllocationID: slot.AllocationID}
	reason := f.What()
	out.Slot, _, err = node.Quarantine(ctx, tx, nodeID, node.SlotSelector{GPU: f.GPU}, reason, Actor, now)
	if err != nil {
		return Outcome{}, err
	}
	meta := audit.Meta{At: now, ActorID: Actor}
	detail := map[string]any{"gpu": f.GPU, "slot": slot.Index, "at": f.At, "message": f.Message,
		"allocation": slot.AllocationID}
	faultDetail(detail, f)
	var events []outbox.Event
	var projectID string
	if slot.AllocationID != "" {
		msg := fmt.Sprintf("GPU %s of allocation %s failed (%s) and was quarantined; "+
			"you are not charged for this allocation from %s on. Release it and create a new one.",
			f.GPU, slot.AllocationID, failure(f), f.At.UTC().Format(time.RFC3339))
		ev, a, err := alloc.QuarantineNotice(ctx, tx, slot.AllocationID, msg)
		if err != nil {
			return Outcome{}, err
		}
		projectID = a.ProjectID
		events = append(events, ev)
		memo := fmt.Sprintf("credit: allocation %s, GPU %s failed with %s at %s: charges since the fault",
			slot.AllocationID, f.GPU, failure(f), f.At.UTC().Format(time.RFC3339))
		if out.Credit, err = billing.CreditFault(ctx, tx, slot.AllocationID, f.At, now, memo); err != nil {
			return Outcome{}, err
		}
		detail["credit_minor"] = out.Credit.Entry.AmountMinor
		if out.Credit.Booked {
			credit := map[string]any{"amount_minor": out.Credit.Entry.AmountMinor, "windows": out.Credit.Windows,
				"gpu": f.GPU, "since": f.At, "reference": out.Credit.Entry.Reference}
			faultDetail(credit, f)
			if err := audit.Write(ctx, tx, meta, audit.Entry{Action: "billing.fault_credit", TargetType: "allocation",
				TargetID: slot.AllocationID, ProjectID: projectID, Detail: credit}); err != nil {
				return Outcome{}, err
			}
		}
	}
	d, err := node.Get(ctx, tx, nodeID)
	if err != nil {
		return Outcome{}, err
	}
	events = append(events, outbox.Event{Kind: api.EventNode, Subject: nodeID, Payload: d.Node})
	if err := audit.Write(ctx, tx, meta, audit.Entry{Action: "node.gpu_fault", TargetType: "node", TargetID: nodeID,
		ProjectID: projectID, Detail: detail}); err != nil {
		return Outcome{}, err
	}
	for _, ev := range events {
		if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
			return Outcome{}, err
		}
	}
	return out, nil
}

// faultDetail adds what identifies f to an audit row's detail: its XID,
// as before ECC faults, or its kind and ECC count.
func faultDetail(detail map[string]any, f hostproto.GPUFault) {
	if f.IsECC() {
		detail["kind"], detail["ecc_uncorrected"] = hostproto.GPUFaultECC, f.ECCUncorrected
		return
	}
	detail["xid"] = f.XID
}

// failure says what failed, for the user's notice and the credit's memo.
func failure(f hostproto.GPUFault) string {
	if f.IsECC() {
		return fmt.Sprintf("uncorrected ECC errors, count %d", f.ECCUncorrected)
	}
	return fmt.Sprintf("XID %d", f.XID)
}

// CheckFailed quarantines the slots of the GPUs that failed a provision
// task's pre-handout check (reason "gpu check failed: …"), in tx, and
// returns the events to enqueue. The task's allocation fails the usual way
// (alloc.ProvisionDone): it was never active, so it is never charged.
func CheckFailed(ctx context.Context, tx pgx.Tx, nodeID string, res api.GPUCheckResult, now time.Time) ([]outbox.Event, error) {
	if len(res.FailedGPUs) == 0 {
		return nil, nil
	}
	now = now.UTC()
	reason := res.Reason
	if len([]rune(reason)) > 200 {
		reason = string([]rune(reason)[:200])
	}
	if reason == "" {
		reason = api.GPUCheckFailed
	}
	var quarantined []int
	for _, gpu := range res.FailedGPUs {
		slot, already, err := node.Quarantine(ctx, tx, nodeID, node.SlotSelector{GPU: gpu}, reason, Actor, now)
		if api.CodeOf(err) == api.CodeNotFound {
			continue // a GPU the node has no slot of: nothing to keep out
		}
		if err != nil {
			return nil, err
		}
		if !already {
			quarantined = append(quarantined, slot.Index)
		}
	}
	if len(quarantined) == 0 {
		return nil, nil
	}
	if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: Actor}, audit.Entry{Action: "node.quarantine",
		TargetType: "node", TargetID: nodeID, Detail: map[string]any{"slots": quarantined, "gpus": res.FailedGPUs,
			"reason": reason}}); err != nil {
		return nil, err
	}
	d, err := node.Get(ctx, tx, nodeID)
	if err != nil {
		return nil, err
	}
	return []outbox.Event{{Kind: api.EventNode, Subject: nodeID, Payload: d.Node}}, nil
}

// ProvisionOutcome is the outcome of an allocation's provisioning once
// GPU faults are counted: a provisioning that succeeded on a slot
// quarantined for a GPU fault meanwhile fails (reason naming the GPU), so
// that the allocation never becomes active — and charged — on a broken
// GPU. Other outcomes are returned as they are.
func ProvisionOutcome(ctx context.Context, tx pgx.Tx, allocationID, status, reason string) (string, string, error) {
	if status != hostproto.TaskSucceeded || allocationID == "" {
		return status, reason, nil
	}
	slots, err := node.Slots(ctx, tx, `allocation_id = $1 AND quarantined_by = $2`, allocationID, Actor)
	if err != nil || len(slots) == 0 {
		return status, reason, err
	}
	s := slots[0]
	return hostproto.TaskFailed, fmt.Sprintf("%s: GPU %s failed during provisioning (%s) and was quarantined",
		api.PhaseGPUCheck, s.GPUPCI, s.Quarantine.Reason), nil
}
