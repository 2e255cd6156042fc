// Package billing owns each project's account: the append-only, hash-chained
// ledger (ledger_entries), the meters of active allocations and the usage
// windows charged from them, low-balance warnings and the release of a
// depleted account's allocations after a grace period. Money is integer
// minor units (cents of usd).
package billing

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Kind is what a ledger entry books.
type Kind string

// Ledger entry kinds.
const (
	KindTopup      Kind = "topup"      // a payment; amount > 0
	KindUsage      Kind = "usage"      // an allocation's usage window; amount < 0
	KindRefund     Kind = "refund"     // money given back; amount < 0
	KindAdjustment Kind = "adjustment" // an operator's credit or debit; amount ≠ 0
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	switch k {
	case KindTopup, KindUsage, KindRefund, KindAdjustment, KindStorage, KindApp:
		return true
	}
	return false
}

// DefaultCurrency is the only currency accounts are kept in for now.
const DefaultCurrency = "usd"

// Entry is one booking in a project's ledger.
type Entry struct {
	ID        int64
	ProjectID string
	Kind      Kind
	// Reference names what is booked (an allocation's window, a Stripe
	// event, an operator action); unique per kind.
	Reference   string
	AmountMinor int64 // credit > 0, debit < 0
	Currency    string
	Memo        string
	ActorID     string
	CreatedAt   time.Time
	// PrevHash is the hash of the account's previous entry ("" for the
	// first); Hash chains this entry to it (hex SHA-256, see EntryHash).
	PrevHash, Hash string
}

// Querier is what the read functions need: a pool and a transaction both
// satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
