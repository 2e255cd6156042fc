package identity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Limit is the failure budget of one kind of login key (an account or a
// source address). MaxFailures failures in a row are free; then each
// further attempt waits out a lockout that starts at Lockout after the
// last failure and doubles with every failure, up to MaxLockout. A
// success resets an account's count; failures older than Window are
// forgotten.
type Limit struct {
	MaxFailures int
	Lockout     time.Duration
	MaxLockout  time.Duration
	Window      time.Duration
}

// Default login limits: an account may fail 5 times, a source address 30
// (many people may share one address), before lockouts start.
var (
	DefaultAccountLimit = Limit{MaxFailures: 5, Lockout: time.Minute, MaxLockout: time.Hour, Window: 24 * time.Hour}
	DefaultSourceLimit  = Limit{MaxFailures: 30, Lockout: time.Minute, MaxLockout: time.Hour, Window: time.Hour}
)

// checkAndSetDefaults fills the zero fields of l from def and checks it.
func (l *Limit) checkAndSetDefaults(what string, def Limit) error {
	if l.MaxFailures == 0 {
		l.MaxFailures = def.MaxFailures
	}
	if l.Lockout == 0 {
		l.Lockout = def.Lockout
	}
	if l.MaxLockout == 0 {
		l.MaxLockout = max(def.MaxLockout, l.Lockout)
	}
	if l.Window == 0 {
		l.Window = max(def.Window, l.MaxLockout)
	}
	switch {
	case l.MaxFailures < 1:
		return fmt.Errorf("identity: %s login limit: MaxFailures must be at least 1", what)
	case l.Lockout <= 0 || l.MaxLockout < l.Lockout:
		return fmt.Errorf("identity: %s login limit: need 0 < Lockout <= MaxLockout", what)
	case l.Window < l.MaxLockout:
		// Forgetting failures before the lockout ends would end it early.
		return fmt.Errorf("identity: %s login limit: Window must be at least MaxLockout", what)
	}
	return nil
}

// lockedUntil is when a key with failures in a row, the last at last, may
// try again; the zero time when it may try now.
func (l Limit) lockedUntil(failures int, last time.Time) time.Time {
	if failures < l.MaxFailures {
		return time.Time{}
	}
	d := l.MaxLockout
	if n := failures - l.MaxFailures; n < 62 {
		if f := float64(l.Lockout) * math.Pow(2, float64(n)); f < float64(l.MaxLockout) {
			d = time.Duration(f)
		}
	}
	return last.Add(d)
}

// LoginLimits are the budgets of auth.login.
type LoginLimits struct {
	Account Limit // keyed on the email asked for, known user or not
	Source  Limit // keyed on the caller's address, when known
}

// CheckAndSetDefaults fills defaults.
func (l *LoginLimits) CheckAndSetDefaults() error {
	if err := l.Account.checkAndSetDefaults("account", DefaultAccountLimit); err != nil {
		return err
	}
	return l.Source.checkAndSetDefaults("source", DefaultSourceLimit)
}

// Beginner starts transactions (a pool).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Limiter counts failed logins in Postgres, so every controld replica
// sees the same counts.
type Limiter struct {
	limits LoginLimits
	now    func() time.Time
}

// NewLimiter returns a Limiter; limits must have been checked.
func NewLimiter(limits LoginLimits, now func() time.Time) *Limiter {
	return &Limiter{limits: limits, now: now}
}

// AccountKey is the login_attempts key of an email address.
func AccountKey(email string) string { return "account:" + strings.ToLower(strings.TrimSpace(email)) }

// SourceKey is the login_attempts key of a caller's address.
func SourceKey(addr string) string { return "source:" + addr }

// Attempt is a login attempt that was let through: it already counts as a
// failure until Succeeded says otherwise.
type Attempt struct {
	l                   *Limiter
	account, source     string
	accountOK, sourceOK bool
}

// Begin counts one attempt against the account (email, when not empty)
// and the source (addr, when not empty), before the password is checked,
// so concurrent guesses cannot overtake the limit. When either is locked
// out it answers rate_limited with the longer wait, and the attempt is
// not counted against a key that was locked.
func (l *Limiter) Begin(ctx context.Context, db Beginner, email, addr string) (*Attempt, error) {
	a := &Attempt{l: l}
	var wait time.Duration
	var which string
	if addr != "" {
		a.source = SourceKey(addr)
		d, err := l.take(ctx, db, a.source, l.limits.Source)
		if err != nil {
			return nil, err
		}
		a.sourceOK = d == 0
		if d > 0 {
			wait, which = d, "from your address"
		}
	}
	if email != "" && wait == 0 {
		a.account = AccountKey(email)
		d, err := l.take(ctx, db, a.account, l.limits.Account)
		if err != nil {
			return nil, err
		}
		a.accountOK = d == 0
		if d > 0 {
			wait, which = d, "for this account"
		}
	}
	if wait > 0 {
		return nil, api.RateLimited("too many failed logins "+which, wait)
	}
	return a, nil
}

// take counts one attempt against key, or returns how long it is locked.
func (l *Limiter) take(ctx context.Context, db Beginner, key string, lim Limit) (time.Duration, error) {
	now := l.now().UTC()
	var wait time.Duration
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		// One statement inserts the key's row or locks the one there is:
		// a successful login may delete it at any moment (Succeeded), and
		// a separate insert-if-missing then SELECT FOR UPDATE would find
		// nothing after such a delete.
		var failures int
		var last time.Time
		if err := tx.QueryRow(ctx, `INSERT INTO login_attempts (key, failures, last_failure_at) VALUES ($1, 0, $2)
			ON CONFLICT (key) DO UPDATE SET failures = login_attempts.failures
			RETURNING failures, last_failure_at`, key, now).Scan(&failures, &last); err != nil {
			return err
		}
		if now.Sub(last) > lim.Window {
			failures = 0
		}
		if until := lim.lockedUntil(failures, last); now.Before(until) {
			wait = until.Sub(now)
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE login_attempts SET failures = $2, last_failure_at = $3 WHERE key = $1`,
			key, failures+1, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("count login attempt: %w", err)
	}
	return wait, nil
}

// Succeeded takes the attempt back, in the transaction of the login it
// let through: the account's failures are forgotten; the source's count
// only loses this attempt, so that one good login does not reset the
// budget of an address guessing at other accounts.
func (a *Attempt) Succeeded(ctx context.Context, q store.Querier) error {
	if a.accountOK {
		if _, err := q.Exec(ctx, `DELETE FROM login_attempts WHERE key = $1`, a.account); err != nil {
			return fmt.Errorf("reset login attempts: %w", err)
		}
	}
	if a.sourceOK {
		if _, err := q.Exec(ctx, `UPDATE login_attempts SET failures = failures - 1 WHERE key = $1 AND failures > 0`,
			a.source); err != nil {
			return fmt.Errorf("reset login attempts: %w", err)
		}
	}
	return nil
}

// Failures returns the failures counted against key (for tests and
// operators).
func Failures(ctx context.Context, q store.Querier, key string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT failures FROM login_attempts WHERE key = $1`, key).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read login attempts: %w", err)
	}
	return n, nil
}
