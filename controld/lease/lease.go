// Package lease owns the leases table: leases with a deadline that keep a
// singleton loop (the outbox relay, billing accrual, the idle evaluator,
// node liveness) on one replica at a time, and fencing tokens (epochs)
// that keep a holder which lost its lease from acting on it
// (docs/decisions/0010-leases-and-fencing.md).
//
// Every time is the database's (clock_timestamp()), so replicas' clocks
// need not agree; a holder measures its own deadline from before it sent
// the renewal that set expires_at, so it stops acting before the row can
// be taken.
package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// Names of controld's singleton leases.
const (
	OutboxRelay    = "outbox.relay"
	BillingAccrual = "billing.accrual"
	IdleEvaluator  = "idle.evaluator"
	NodeLiveness   = "node.liveness"
	// ReceiverPrefix + a replica's id is held while the replica receives
	// node reports (heartbeats among them); it is never released, only
	// left to lapse (see Receivers).
	ReceiverPrefix = "hosts.receiver."
)

// ErrLost is a holder's lease expired or taken: what it does under that
// lease must stop, and its writes are refused (Fence).
var ErrLost = errors.New("lease lost")

// Token is a held lease: its name, holder and fencing epoch.
type Token struct {
	Name, Holder string
	Epoch        int64
}

// TryAcquire takes lease name for holder for ttl when no one holds it (no
// row, or its row expired), or when holder holds it already (a restarted
// loop of the same replica): either way the epoch goes up, so writes made
// under an earlier token are refused. ok is false while another holder's
// lease runs.
func TryAcquire(ctx context.Context, q store.Querier, name, holder string, ttl time.Duration) (Token, bool, error) {
	var epoch int64
	err := q.QueryRow(ctx, `INSERT INTO leases AS l (name, holder, epoch, acquired_at, renewed_at, expires_at)
		VALUES ($1, $2, 1, clock_timestamp(), clock_timestamp(), clock_timestamp() + $3 * interval '1 millisecond')
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = l.epoch + 1,
			acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, expires_at = excluded.expires_at
		WHERE l.expires_at <= clock_timestamp() OR l.holder = excluded.holder
		RETURNING epoch`, name, holder, ttl.Milliseconds()).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, false, nil
	}
	if err != nil {
		return Token{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return Token{Name: name, Holder: holder, Epoch: epoch}, true, nil
}

// Renew extends tok's lease to ttl from now, if it still runs; ok is false
// when it expired or was taken (the holder must stop).
func Renew(ctx context.Context, q store.Querier, tok Token, ttl time.Duration) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE leases SET renewed_at = clock_timestamp(),
		expires_at = clock_timestamp() + $4 * interval '1 millisecond' WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()`,
		tok.Name, tok.Holder, tok.Epoch, ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", tok.Name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Release ends tok's lease now, so that another replica may take it at
// once; the row (and its epoch) stays.
func Release(ctx context.Context, q store.Querier, tok Token) error {
	if _, err := q.Exec(ctx, `UPDATE leases SET expires_at = clock_timestamp()
		WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()`,
		tok.Name, tok.Holder, tok.Epoch); err != nil {
		return fmt.Errorf("release lease %s: %w", tok.Name, err)
	}
	return nil
}

// Check fails with ErrLost unless tok's lease still runs. In a
// transaction it also locks the lease row until the transaction ends, so
// the lease cannot change hands before the transaction's writes commit:
// call it last, just before the commit.
func Check(ctx context.Context, q store.Querier, tok Token) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND epoch = $3
		AND expires_at > clock_timestamp() FOR UPDATE`, tok.Name, tok.Holder, tok.Epoch).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s (epoch %d): %w", tok.Name, tok.Epoch, ErrLost)
	}
	if err != nil {
		return fmt.Errorf("check lease %s: %w", tok.Name, err)
	}
	return nil
}

// Holder returns who holds lease name now, "" when no one does.
func Holder(ctx context.Context, q store.Querier, name string) (string, error) {
	var holder string
	err := q.QueryRow(ctx, `SELECT holder FROM leases WHERE name = $1 AND expires_at > clock_timestamp()`, name).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("lease holder %s: %w", name, err)
	}
	return holder, nil
}

// Coverage is what the report receivers' leases (names prefix…) say
// about when the cluster could record what nodes sent, by the database's
// clock (Now).
type Coverage struct {
	Now time.Time
	// Live is false when no receiver's lease runs: nobody receives.
	Live bool
	// Horizon is the oldest last renewal of the running receivers' leases:
	// each of them is known to have been able to record until then, not
	// after (a receiver cut off from Postgres stops renewing at once).
	Horizon time.Time
	// LastLapse is the latest expiry of a receiver lease that lapsed
	// (zero if none did within keep): a receiver stops receiving before
	// its lease can lapse, so whatever it swallowed, it swallowed before.
	LastLapse time.Time
}

// Receivers returns the Coverage of the report receivers' leases, and
// forgets those that lapsed longer than keep ago.
func Receivers(ctx context.Context, q store.Querier, prefix string, keep time.Duration) (Coverage, error) {
	if _, err := q.Exec(ctx, `DELETE FROM leases WHERE starts_with(name, $1)
		AND expires_at < clock_timestamp() - $2 * interval '1 millisecond'`, prefix, keep.Milliseconds()); err != nil {
		return Coverage{}, fmt.Errorf("forget lapsed leases %s: %w", prefix, err)
	}
	var c Coverage
	var horizon, lapse *time.Time
	if err := q.QueryRow(ctx, `SELECT clock_timestamp(),
			min(renewed_at) FILTER (WHERE expires_at > clock_timestamp()),
			max(expires_at) FILTER (WHERE expires_at <= clock_timestamp())
		FROM leases WHERE starts_with(name, $1)`, prefix).Scan(&c.Now, &horizon, &lapse); err != nil {
		return Coverage{}, fmt.Errorf("receiver leases %s: %w", prefix, err)
	}
	if horizon != nil {
		c.Live, c.Horizon = true, *horizon
	}
	if lapse != nil {
		c.LastLapse = *lapse
	}
	return c, nil
}

// HeldEpoch returns the epoch of lease name while someone holds it, 0
// when no one does.
func HeldEpoch(ctx context.Context, q store.Querier, name string) (int, error) {
	var epoch int
	err := q.QueryRow(ctx, `SELECT coalesce(max(epoch), 0) FROM leases WHERE name = $1 AND expires_at > clock_timestamp()`,
		name).Scan(&epoch)
	if err != nil {
		return 0, fmt.Errorf("lease %s: %w", name, err)
	}
	return epoch, nil
}
