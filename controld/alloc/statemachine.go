package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/internal/api"
)

// transitions is the one table of legal state changes (docs/architecture.md,
// "Flows"). Nothing else in controld changes an
// allocation's state.
var transitions = map[string][]string{
	api.AllocRequested:     {api.AllocProvisioning, api.AllocReleased, api.AllocFailed},
	api.AllocProvisioning:  {api.AllocActive, api.AllocFailed, api.AllocReleasing},
	api.AllocActive:        {api.AllocReleasing},
	api.AllocReleasing:     {api.AllocReleased, api.AllocReleaseFailed},
	api.AllocReleaseFailed: {api.AllocReleasing},
	api.AllocFailed:        {api.AllocReleasing},
	api.AllocReleased:      nil,
}

// CanTransition reports whether from → to is legal.
func CanTransition(from, to string) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Terminal reports whether no transition leaves state.
func Terminal(state string) bool { return len(transitions[state]) == 0 }

// transition moves a to state `to` if the table allows it and nobody
// changed the row since it was read (optimistic lock on version). It
// records the change and updates a in place.
func transition(ctx context.Context, tx pgx.Tx, a *api.Allocation, to, reason, actor string, now time.Time) error {
	from := a.State
	if !CanTransition(from, to) {
		return api.Errorf(api.CodeConflict, "allocation %s is %s; it cannot become %s", a.ID, from, to)
	}
	tag, err := tx.Exec(ctx, transitionSQL, a.ID, a.Version, to, reason, now)
	if err != nil {
		return fmt.Errorf("transition %s %s→%s: %w", a.ID, from, to, err)
	}
	if tag.RowsAffected() == 0 {
		return changedBySomeoneElse(a.ID)
	}
	if _, err := tx.Exec(ctx, transitionRecordSQL, a.ID, from, to, reason, actor, now); err != nil {
		return fmt.Errorf("record transition: %w", err)
	}
	transitioned(a, to, reason, now)
	return meter(ctx, tx, a, from, to, now)
}

// queueTransition queues transition's two statements in b, for a caller
// that sends them with others in one round trip. Only for an allocation
// this transaction inserted or holds locked, in a transaction (or
// savepoint) that is rolled back on any error: the record is inserted
// even when the update finds the row changed (the batch is already
// sent), and the error comes back when the batch's results are read.
// After the batch, the caller calls transitioned and meter.
func queueTransition(b *pgx.Batch, a *api.Allocation, to, reason, actor string, now time.Time) error {
	from := a.State
	if !CanTransition(from, to) {
		return api.Errorf(api.CodeConflict, "allocation %s is %s; it cannot become %s", a.ID, from, to)
	}
	id := a.ID
	b.Queue(transitionSQL, id, a.Version, to, reason, now).Fn = func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("transition %s %s→%s: %w", id, from, to, err)
		}
		if tag.RowsAffected() == 0 {
			return changedBySomeoneElse(id)
		}
		return nil
	}
	b.Queue(transitionRecordSQL, id, from, to, reason, actor, now).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("record transition: %w", err)
		}
		return nil
	}
	return nil
}

// transitioned updates a in place after its transition to `to`.
func transitioned(a *api.Allocation, to, reason string, now time.Time) {
	a.State, a.Version, a.Reason, a.UpdatedAt = to, a.Version+1, reason, now
	if to != api.AllocRequested {
		a.Queued = false
	}
}

func changedBySomeoneElse(id string) error {
	return api.Errorf(api.CodeConflict, "allocation %s was changed by someone else", id).
		WithHint("run `gpuaas alloc get " + id + "` to see its state, then retry")
}

const (
	transitionSQL = `UPDATE allocations SET state=$3, version=version+1, reason=$4, updated_at=$5,
		queued = queued AND $3 = 'requested'
		WHERE id=$1 AND version=$2`
	transitionRecordSQL = `INSERT INTO allocation_transitions (allocation_id, from_state, to_state, reason, actor_id, at)
		VALUES ($1,$2,$3,$4,$5,$6)`
)

// meter starts billing when an allocation becomes active and stops it,
// charging the final partial window, when it leaves active: billing runs
// exactly while the allocation is active, and stops at the release
// request rather than when hostd has finished.
func meter(ctx context.Context, tx pgx.Tx, a *api.Allocation, from, to string, now time.Time) error {
	switch {
	case to == api.AllocActive:
		price, currency, err := catalog.Price(ctx, tx, a.SKU)
		if err != nil {
			return err
		}
		return billing.StartMeter(ctx, tx, billing.Meter{AllocationID: a.ID, ProjectID: a.ProjectID, UserID: a.UserID, SKU: a.SKU,
			GPUs: a.GPUs, PricePerGPUHourMinor: price, Currency: currency}, now)
	case from == api.AllocActive:
		u, err := billing.StopMeter(ctx, tx, a.ID, now)
		if err != nil {
			return err
		}
		a.Usage = usageOf(u)
	}
	return nil
}

// usageOf is the wire form of an allocation's usage.
func usageOf(u billing.Usage) *api.AllocationUsage {
	out := &api.AllocationUsage{AllocationID: u.AllocationID, SKU: u.SKU, GPUs: u.GPUs,
		PricePerGPUHourMinor: u.PricePerGPUHourMinor, Currency: u.Currency, StartedAt: u.StartedAt,
		StoppedAt: u.StoppedAt, Seconds: u.Seconds, AmountMinor: u.AmountMinor}
	for _, w := range u.Windows {
		out.Windows = append(out.Windows, api.UsageWindow{Start: w.Start, End: w.End, Seconds: w.Seconds, AmountMinor: w.AmountMinor})
	}
	return out
}
