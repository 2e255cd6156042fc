package billing

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// SetAccrualBatchMeters makes the accrual's batches of accounts hold at
// most n meters until the returned function restores the size.
func SetAccrualBatchMeters(n int) (restore func()) {
	was := accrualBatchMeters
	accrualBatchMeters = n
	return func() { accrualBatchMeters = was }
}

// LockAccounts is the accrual's lockAccounts: the last seq of each account
// it returned a head for.
func LockAccounts(ctx context.Context, tx pgx.Tx, projects []string) (map[string]int64, error) {
	heads, err := lockAccounts(ctx, tx, projects)
	seqs := make(map[string]int64, len(heads))
	for p, h := range heads {
		seqs[p] = h.seq
	}
	return seqs, err
}
