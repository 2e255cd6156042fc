package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// HealthActor books the credits of GPU faults.
const HealthActor = "system:health"

// FaultCredit is what CreditFault booked.
type FaultCredit struct {
	Entry Entry
	// Windows is how many charged windows the credit covers, the
	// allocation's and its app meters'.
	Windows int
	// Booked is false when nothing was booked: no meter, nothing charged
	// since the fault, or the allocation was credited for a fault before.
	Booked bool
}

// FaultCreditReference is the ledger reference of an allocation's fault
// credit: one per allocation.
func FaultCreditReference(allocationID string) string { return "gpu-fault:" + allocationID }

// CreditFault gives back what an allocation was charged since one of its
// GPUs failed at faultAt, in tx. It first stops the allocation's meter at
// now (charging the last partial window), so nothing after the fault is
// ever charged, however long the allocation stays up; then it books one
// adjustment equal to every charged window that ends after the fault. A
// window the fault falls in is credited whole: the remainder is in the
// customer's favour. The app charges of its workloads' windows after the
// fault (appmeter.go) are in the same adjustment: an app runs through its
// allocation, so time refunded for the allocation is refunded for its apps
// too (docs/decisions/0059-app-prices.md). The credit is booked once per
// allocation (reference
// FaultCreditReference): a later fault of another of its GPUs finds the
// meter stopped and everything since the first fault credited.
func CreditFault(ctx context.Context, tx pgx.Tx, allocationID string, faultAt, now time.Time, memo string) (FaultCredit, error) {
	u, err := StopMeter(ctx, tx, allocationID, now)
	if err != nil {
		return FaultCredit{}, err
	}
	if u.ProjectID == "" { // never metered: nothing was charged
		return FaultCredit{}, nil
	}
	var c FaultCredit
	var amount int64
	if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(amount_minor), 0)::bigint FROM (
			SELECT amount_minor FROM usage_charges WHERE allocation_id = $1 AND window_end > $2
			UNION ALL
			SELECT amount_minor FROM app_charges WHERE allocation_id = $1 AND window_end > $2) c`,
		allocationID, faultAt).Scan(&c.Windows, &amount); err != nil {
		return FaultCredit{}, fmt.Errorf("charges of %s since the fault: %w", allocationID, err)
	}
	if amount == 0 {
		return c, nil
	}
	c.Entry, c.Booked, err = Append(ctx, tx, Entry{ProjectID: u.ProjectID, Kind: KindAdjustment,
		Reference: FaultCreditReference(allocationID), AmountMinor: amount, Currency: u.Currency, Memo: memo,
		ActorID: HealthActor, CreatedAt: now.Truncate(time.Microsecond)})
	if err != nil {
		return FaultCredit{}, err
	}
	return c, nil
}
