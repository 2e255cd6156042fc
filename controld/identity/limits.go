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

// Limit is the failure budget of one kind of login key (a client at an
// account, or a source address). MaxFailures failures in a row are free;
// then each further attempt waits out a lockout that starts at Lockout
// after the last failure and doubles with every failure, up to
// MaxLockout. A success resets a client's count; failures older than
// Window are forgotten.
type Limit struct {
	MaxFailures int
	Lockout     time.Duration
	MaxLockout  time.Duration
	Window      time.Duration
}

// Slowdown is the account-wide defence against guesses spread over many
// addresses. Once an account has had Failures failed logins, from all
// addresses together, within Window, every address that has itself failed
// at the account gets no free failures left: it waits the Account
// lockout, doubling, after each of its failures. An address that has not
// failed at the account is never held back by it, so the owner can always
// log in from their own address, however many others guess.
type Slowdown struct {
	Failures int
	Window   time.Duration
}

// Default login limits: one address may fail 5 times at one account, and
// 30 times over all accounts (many people may share one address), before
// lockouts start; an account guessed at 20 times slows every address that
// failed at it.
var (
	DefaultAccountLimit = Limit{MaxFailures: 5, Lockout: time.Minute, MaxLockout: time.Hour, Window: 24 * time.Hour}
	DefaultSourceLimit  = Limit{MaxFailures: 30, Lockout: time.Minute, MaxLockout: time.Hour, Window: time.Hour}
	DefaultSlowdown     = Slowdown{Failures: 20, Window: 24 * time.Hour}
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
	// Account is keyed on the email asked for (known user or not) and the
	// caller's address together: an address's failures lock only that
	// address out of the account.
	Account Limit
	// Source is keyed on the caller's address, when known.
	Source Limit
	// Slowdown is keyed on the email asked for, all addresses together.
	Slowdown Slowdown
}

// CheckAndSetDefaults fills defaults.
func (l *LoginLimits) CheckAndSetDefaults() error {
	if err := l.Account.checkAndSetDefaults("account", DefaultAccountLimit); err != nil {
		return err
	}
	if err := l.Source.checkAndSetDefaults("source", DefaultSourceLimit); err != nil {
		return err
	}
	if l.Slowdown.Failures == 0 {
		l.Slowdown.Failures = DefaultSlowdown.Failures
	}
	if l.Slowdown.Window == 0 {
		l.Slowdown.Window = DefaultSlowdown.Window
	}
	if l.Slowdown.Failures < 1 || l.Slowdown.Window < 0 {
		return errors.New("identity: login slowdown: need Failures >= 1 and a positive Window")
	}
	return nil
}

// window is the longest time a login_attempts row matters.
func (l LoginLimits) window() time.Duration {
	return max(l.Account.Window, l.Source.Window, l.Slowdown.Window)
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

// AccountKey is the login_attempts key counting an email address's
// failures from all addresses (the slowdown's count).
func AccountKey(email string) string { return "account:" + normalEmail(email) }

// ClientKey is the login_attempts key of one address's attempts at one
// email address ("" when the address is unknown). An address has no '/',
// so the key names one pair.
func ClientKey(email, addr string) string { return "client:" + addr + "/" + normalEmail(email) }

// SourceKey is the login_attempts key of a caller's address.
func SourceKey(addr string) string { return "source:" + addr }

func normalEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Attempt is a login attempt that was let through: it already counts as a
// failure until Succeeded says otherwise.
type Attempt struct {
	l                             *Limiter
	at                            time.Time
	account, client, source       string
	accountOK, clientOK, sourceOK bool
	// What the keys count with this attempt, and the client's limit
	// (Account, or no free failures under a slowdown).
	accountN, clientN, sourceN int
	clientLimit                Limit
}

// Begin counts one attempt against the address (addr, when not empty),
// the client at the account (email and addr) and the account (email,
// when not empty), before the password is checked, so concurrent guesses
// cannot overtake the limits. When the address or the client is locked
// out it answers rate_limited with the wait, and the attempt is not
// counted against the keys after it (a locked client's retries still
// count against its address).
func (l *Limiter) Begin(ctx context.Context, db Beginner, email, addr string) (*Attempt, error) {
	a := &Attempt{l: l, at: l.now().UTC()}
	if addr != "" {
		a.source = SourceKey(addr)
		n, wait, err := l.take(ctx, db, a.source, l.limits.Source, a.at)
		if err != nil {
			return nil, err
		}
		if wait > 0 {
			return nil, api.RateLimited("too many failed logins from your address", wait)
		}
		a.sourceOK, a.sourceN = true, n
	}
	if email == "" {
		return a, nil
	}
	a.account, a.client = AccountKey(email), ClientKey(email, addr)
	slowed, err := l.slowedDown(ctx, db, a.account, a.at)
	if err != nil {
		return nil, err
	}
	a.clientLimit = l.limits.Account
	if slowed {
		a.clientLimit.MaxFailures = 1
	}
	n, wait, err := l.take(ctx, db, a.client, a.clientLimit, a.at)
	if err != nil {
		return nil, err
	}
	if wait > 0 {
		msg := "too many failed logins for this account from your address"
		if slowed {
			msg = "this account is being guessed at: after a failed login, each address waits before trying again"
		}
		return nil, api.RateLimited(msg, wait)
	}
	a.clientOK, a.clientN = true, n
	all := l.limits.Slowdown
	if a.accountN, _, err = l.take(ctx, db, a.account, Limit{MaxFailures: math.MaxInt, Window: all.Window}, a.at); err != nil {
		return nil, err
	}
	a.accountOK = true
	return a, nil
}

// slowedDown reports whether the account's failures from all addresses
// have reached the slowdown's threshold within its window.
func (l *Limiter) slowedDown(ctx context.Context, db Beginner, key string, now time.Time) (bool, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("read login attempts: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only
	var failures int
	var last time.Time
	err = tx.QueryRow(ctx, `SELECT failures, last_failure_at FROM login_attempts WHERE key = $1`, key).Scan(&failures, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read login attempts: %w", err)
	}
	return now.Sub(last) <= l.limits.Slowdown.Window && failures >= l.limits.Slowdown.Failures, nil
}

// take counts one attempt against key and returns the count, or returns
// how long it is locked.
func (l *Limiter) take(ctx context.Context, db Beginner, key string, lim Limit, now time.Time) (int, time.Duration, error) {
	var wait time.Duration
	var counted int
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
		counted = failures + 1
		_, err := tx.Exec(ctx, `UPDATE login_attempts SET failures = $2, last_failure_at = $3 WHERE key = $1`,
			key, counted, now)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("count login attempt: %w", err)
	}
	return counted, wait, nil
}

// uncount takes one attempt back from key.
func uncount(ctx context.Context, q store.Querier, key string) error {
	if _, err := q.Exec(ctx, `UPDATE login_attempts SET failures = failures - 1 WHERE key = $1 AND failures > 0`, key); err != nil {
		return fmt.Errorf("reset login attempts: %w", err)
	}
	return nil
}

// Succeeded takes the attempt back, in the transaction of the login it
// let through: the client's failures at the account are forgotten; the
// source's and the account's counts only lose this attempt, so that one
// good login neither resets the budget of an address guessing at other
// accounts nor ends a slowdown others are causing.
func (a *Attempt) Succeeded(ctx context.Context, q store.Querier) error {
	if a.clientOK {
		if _, err := q.Exec(ctx, `DELETE FROM login_attempts WHERE key = $1`, a.client); err != nil {
			return fmt.Errorf("reset login attempts: %w", err)
		}
	}
	for _, k := range []struct {
		ok  bool
		key string
	}{{a.accountOK, a.account}, {a.sourceOK, a.source}} {
		if k.ok {
			if err := uncount(ctx, q, k.key); err != nil {
				return err
			}
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
