package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// HealthActor is who quarantines a slot on a GPU fault report.
const HealthActor = "system:health"

// maxReasonLen bounds a quarantine reason (runes).
const maxReasonLen = 200

// SlotSelector names one slot of a node: by index or by GPU PCI address.
type SlotSelector struct {
	Index *int
	GPU   string
}

func (s SlotSelector) none() bool { return s.Index == nil && s.GPU == "" }

func (s SlotSelector) String() string {
	if s.Index != nil {
		return fmt.Sprintf("slot %d", *s.Index)
	}
	return "GPU " + s.GPU
}

// where is the selector's condition on slots, its argument numbered n.
func (s SlotSelector) where(n int) (string, any) {
	if s.Index != nil {
		return fmt.Sprintf("idx = $%d", n), *s.Index
	}
	return fmt.Sprintf("gpu_pci = $%d", n), s.GPU
}

// CheckSelector refuses a selector naming both or (unless optional)
// neither of index and GPU.
func CheckSelector(s SlotSelector, optional bool) error {
	switch {
	case s.Index != nil && s.GPU != "":
		return api.Errorf(api.CodeInvalidArgument, "name the slot by --slot or by --gpu, not both")
	case s.none() && !optional:
		return api.Errorf(api.CodeInvalidArgument, "name the slot to quarantine (--slot IDX or --gpu PCI)")
	case s.Index != nil && *s.Index < 0:
		return api.Errorf(api.CodeInvalidArgument, "slot index %d is negative", *s.Index)
	}
	return nil
}

// CheckReason refuses an empty or overlong quarantine reason.
func CheckReason(reason string) error {
	r := strings.TrimSpace(reason)
	switch {
	case r == "":
		return api.Errorf(api.CodeInvalidArgument, "a quarantine needs a reason (--reason TEXT)")
	case utf8.RuneCountInString(r) > maxReasonLen:
		return api.Errorf(api.CodeInvalidArgument, "the reason is longer than %d characters", maxReasonLen)
	case strings.ContainsAny(r, "\n\r\x00"):
		return api.Errorf(api.CodeInvalidArgument, "the reason must be one line")
	}
	return nil
}

// Quarantine keeps one slot of a node out of placement, whatever its
// state: a reserved slot stays its allocation's. A slot already
// quarantined is a conflict for an operator (already) is true and the
// slot is returned unchanged.
func Quarantine(ctx context.Context, q store.Querier, nodeID string, sel SlotSelector, reason, by string,
	now time.Time) (slot api.Slot, already bool, err error) {
	if err := CheckSelector(sel, false); err != nil {
		return api.Slot{}, false, err
	}
	if err := CheckReason(reason); err != nil {
		return api.Slot{}, false, err
	}
	cond, arg := sel.where(2)
	rows, err := q.Query(ctx, `SELECT `+slotColumns+` FROM slots WHERE node_id = $1 AND `+cond+` FOR UPDATE`, nodeID, arg)
	if err != nil {
		return api.Slot{}, false, fmt.Errorf("quarantine %s: %w", sel, err)
	}
	slot, err = pgx.CollectExactlyOneRow(rows, scanSlot)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Slot{}, false, api.Errorf(api.CodeNotFound, "node has no %s", sel).WithHint("see `gpuaas node get NODE`")
	}
	if err != nil {
		return api.Slot{}, false, fmt.Errorf("quarantine %s: %w", sel, err)
	}
	if slot.Quarantine != nil {
		return slot, true, nil
	}
	rows, err = q.Query(ctx, `UPDATE slots SET quarantined_at = $2, quarantine_reason = $3, quarantined_by = $4
		WHERE id = $1 RETURNING `+slotColumns, slot.ID, now.UTC(), strings.TrimSpace(reason), by)
	if err != nil {
		return api.Slot{}, false, fmt.Errorf("quarantine %s: %w", sel, err)
	}
	slot, err = pgx.CollectExactlyOneRow(rows, scanSlot)
	if err != nil {
		return api.Slot{}, false, fmt.Errorf("quarantine %s: %w", sel, err)
	}
	return slot, false, nil
}

// ClearQuarantine makes quarantined slots of a node placeable again: the
// one selected, or every quarantined one with an empty selector. It
// returns the slots cleared; none is a conflict.
func ClearQuarantine(ctx context.Context, q store.Querier, nodeID string, sel SlotSelector) ([]api.Slot, error) {
	if err := CheckSelector(sel, true); err != nil {
		return nil, err
	}
	where, args := `node_id = $1`, []any{nodeID}
	if !sel.none() {
		cond, arg := sel.where(2)
		where += ` AND ` + cond
		args = append(args, arg)
		var quarantined *time.Time
		err := q.QueryRow(ctx, `SELECT quarantined_at FROM slots WHERE `+where, args...).Scan(&quarantined)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, api.Errorf(api.CodeNotFound, "node has no %s", sel).WithHint("see `gpuaas node get NODE`")
		}
		if err != nil {
			return nil, fmt.Errorf("clear quarantine: %w", err)
		}
	}
	rows, err := q.Query(ctx, `UPDATE slots SET quarantined_at = NULL, quarantine_reason = '', quarantined_by = ''
		WHERE `+where+` AND quarantined_at IS NOT NULL RETURNING `+slotColumns, args...)
	if err != nil {
		return nil, fmt.Errorf("clear quarantine: %w", err)
	}
	cleared, err := collectSlots(rows)
	if err != nil {
		return nil, err
	}
	if len(cleared) == 0 {
		if sel.none() {
			return nil, api.Errorf(api.CodeConflict, "no slot of this node is quarantined")
		}
		return nil, api.Errorf(api.CodeConflict, "%s is not quarantined", sel)
	}
	return cleared, nil
}

// SlotByGPU returns the slot of a node holding a GPU; found is false when
// the node has none with that PCI address.
func SlotByGPU(ctx context.Context, q store.Querier, nodeID, gpu string) (api.Slot, bool, error) {
	slots, err := Slots(ctx, q, `node_id = $1 AND gpu_pci = $2`, nodeID, gpu)
	if err != nil || len(slots) == 0 {
		return api.Slot{}, false, err
	}
	return slots[0], true, nil
}

// RecordFault records a GPU fault a node reported, once: inserted is
// false when the same fault (node, GPU, kind, XID, time) was recorded
// before, and then nothing is written.
func RecordFault(ctx context.Context, q store.Querier, nodeID string, f hostproto.GPUFault, allocationID string, now time.Time) (inserted bool, err error) {
	kind := hostproto.GPUFaultXID
	if f.IsECC() {
		kind = hostproto.GPUFaultECC
	}
	tag, err := q.Exec(ctx, `INSERT INTO gpu_faults (node_id, gpu_pci, kind, xid, ecc_uncorrected, at, message, allocation_id, received_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
		nodeID, f.GPU, kind, f.XID, int64(f.ECCUncorrected), f.At.UTC(), f.Message, allocationID, now.UTC())
	if err != nil {
		return false, fmt.Errorf("record fault of %s: %w", f.GPU, err)
	}
	return tag.RowsAffected() == 1, nil
}
