package singleton

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// lockIdleTimeout bounds how long a tick's transaction may sit idle: a
// replica that stops mid-tick (paused, cut off) must not keep the lock
// for as long as the server keeps its session.
const lockIdleTimeout = `SET LOCAL idle_in_transaction_session_timeout = '10s'`

// TryLock takes the transaction-scoped advisory lock key in tx, so that
// one replica at a time runs a tick; ok is false when another
// transaction holds it (the tick is skipped). The lock ends with tx, and
// tx is ended by the server after 10 s idle.
func TryLock(ctx context.Context, tx pgx.Tx, key string) (ok bool, err error) {
	if _, err := tx.Exec(ctx, lockIdleTimeout); err != nil {
		return false, fmt.Errorf("lock %s: %w", key, err)
	}
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))`, key).Scan(&ok); err != nil {
		return false, fmt.Errorf("lock %s: %w", key, err)
	}
	return ok, nil
}
