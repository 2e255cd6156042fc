package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/lease"
	"github.com/gpuaas/gpuaas/controld/singleton"
)

// Defaults of Config.
const (
	DefaultWindow                   = 60 * time.Second
	DefaultGrace                    = 15 * time.Minute
	DefaultLowBalanceThresholdMinor = 1000 // $10
	// DefaultMinRunway is how long a project's balance must last at its
	// total burn, the new allocation included, for a create to go ahead.
	DefaultMinRunway = 10 * time.Minute
)

// accrualLockKey names the advisory lock that lets one replica at a time
// run the billing loop.
const accrualLockKey = "gpuaas.billing.accrual"

// ReleaseFunc force-releases every open allocation of a depleted project
// through the allocation state machine and returns how many it released.
// It must re-check, in each release's transaction, that the project is
// still depleted past its grace period (see StillDepleted): a top-up may
// land in between. controld provides it (billing cannot import
// controld/alloc, which calls billing when allocations start and stop).
type ReleaseFunc func(ctx context.Context, projectID string) (int, error)

// SMTP is a relay for billing emails.
type SMTP struct {
	Addr     string // host:port; empty sends no email
	From     string
	Username string
	Password string
}

// Settings tune billing. Zero values take the defaults.
type Settings struct {
	// Window is how often usage is charged (default DefaultWindow).
	Window time.Duration
	// Grace is how long a depleted account keeps its allocations (default
	// DefaultGrace).
	Grace time.Duration
	// LowBalanceThresholdMinor is the default low-balance threshold of
	// accounts that set none (default DefaultLowBalanceThresholdMinor).
	LowBalanceThresholdMinor int64
	// MinRunway is how long a project's balance must last at its total
	// burn (its placed allocations and the new one) for alloc.create, or
	// the placement of a queued request, to go ahead (default
	// DefaultMinRunway).
	MinRunway time.Duration
	// SMTP, when Addr is set, also emails project members about low and
	// depleted balances.
	SMTP SMTP
}

// CheckAndSetDefaults validates s and fills defaults.
func (s *Settings) CheckAndSetDefaults() error {
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	if s.Window < time.Second {
		return fmt.Errorf("billing: window %v is shorter than a second", s.Window)
	}
	if s.Grace == 0 {
		s.Grace = DefaultGrace
	}
	if s.Grace < 0 {
		return errors.New("billing: grace must not be negative")
	}
	if s.LowBalanceThresholdMinor == 0 {
		s.LowBalanceThresholdMinor = DefaultLowBalanceThresholdMinor
	}
	if s.LowBalanceThresholdMinor < 0 {
		return errors.New("billing: low-balance threshold must not be negative")
	}
	if s.MinRunway == 0 {
		s.MinRunway = DefaultMinRunway
	}
	if s.MinRunway < 0 {
		return errors.New("billing: minimum runway must not be negative")
	}
	if s.SMTP.Addr != "" && s.SMTP.From == "" {
		return errors.New("billing: SMTP needs a From address")
	}
	return nil
}

// Config configures a Runner.
type Config struct {
	Settings
	// Pool is controld's database pool. Required.
	Pool *pgxpool.Pool
	// Release releases a depleted project's allocations. Required.
	Release ReleaseFunc
	// ReleaseBudget releases the running allocations of a budget's scope
	// whose spend reached its cap with action release; nil releases none.
	ReleaseBudget BudgetReleaseFunc
	// Mailer sends the emails; default an SMTPMailer for Settings.SMTP
	// when its Addr is set, else none.
	Mailer Mailer
	Now    func() time.Time
	Log    *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Pool == nil {
		return errors.New("billing: Pool is required")
	}
	if c.Release == nil {
		return errors.New("billing: Release is required")
	}
	if err := c.Settings.CheckAndSetDefaults(); err != nil {
		return err
	}
	if m := c.SMTP; c.Mailer == nil && m.Addr != "" {
		c.Mailer = &SMTPMailer{Addr: m.Addr, From: m.From, Username: m.Username, Password: m.Password}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Runner is the billing loop: every window it charges the running meters,
// warns about low balances, marks depleted accounts and releases the
// allocations of those whose grace period is over.
type Runner struct {
	cfg Config
}

// NewRunner returns a Runner for cfg.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg}, nil
}

// Config returns the runner's configuration with its defaults.
func (r *Runner) Config() Config { return r.cfg }

// Run ticks every window until ctx ends (singleton.Loop).
func (r *Runner) Run(ctx context.Context) error {
	return singleton.Loop{Name: "billing tick", Interval: r.cfg.Window, Log: r.cfg.Log,
		Tick: func(ctx context.Context) ([]any, error) {
			res, err := r.Tick(ctx)
			if err != nil || (res.Accrual.Windows == 0 && res.Released == 0) {
				return nil, err
			}
			return []any{"windows", res.Accrual.Windows, "charged_minor", res.Accrual.AmountMinor,
				"low_balance", res.LowBalance, "depleted", res.Depleted, "released", res.Released}, nil
		}}.Run(ctx)
}

// TickResult is what one tick did.
type TickResult struct {
	// Skipped is true when another replica held the billing lock.
	Skipped    bool
	Accrual    AccrualResult
	LowBalance int // warnings sent
	Depleted   int // accounts newly depleted
	Released   int // allocations released
	// BudgetCrossings counts the budget levels crossed (80 % and 100 %),
	// BudgetReleased the allocations released at a budget's cap.
	BudgetCrossings int
	BudgetReleased  int
}

// Tick runs the loop once: under a transaction-scoped advisory lock (one
// replica at a time; a replica that does not get it skips the tick), it
// charges every running meter up to the last window boundary and updates
// the accounts' low-balance and depleted state with their events; after
// committing it sends the emails and releases the allocations of accounts
// depleted for longer than the grace period.
func (r *Runner) Tick(ctx context.Context) (TickResult, error) {
	var res TickResult
	now := r.cfg.Now().UTC()
	var notes []notice
	err := pgx.BeginFunc(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
		locked, err := singleton.TryLock(ctx, tx, accrualLockKey)
		if err != nil {
			return fmt.Errorf("billing: %w", err)
		}
		if !locked {
			res.Skipped = true
			return nil
		}
		if res.Accrual, err = Accrue(ctx, tx, WindowEnd(now, r.cfg.Window), now); err != nil {
			return err
		}
		if notes, err = evaluate(ctx, tx, r.cfg.LowBalanceThresholdMinor, r.cfg.Grace, now); err != nil {
			return err
		}
		budgetNotes, err := evaluateBudgets(ctx, tx, now)
		notes = append(notes, budgetNotes...)
		if err != nil {
			return err
		}
		// Under controld's billing lease, the tick commits only while the
		// lease is still this replica's (a paused holder cannot charge).
		return lease.Fence(ctx, tx)
	})
	if err != nil || res.Skipped {
		return res, err
	}
	for _, n := range notes {
		switch n.kind {
		case noticeLow:
			res.LowBalance++
		case noticeDepleted:
			res.Depleted++
		case noticeBudget:
			res.BudgetCrossings++
		}
		if r.cfg.Mailer != nil && len(n.emails) > 0 {
			if err := r.cfg.Mailer.Send(ctx, n.emails, n.subject, n.body); err != nil {
				r.cfg.Log.Warn("billing email", "project", n.projectID, "err", err)
			}
		}
	}
	due, err := depletedPastGrace(ctx, r.cfg.Pool, r.cfg.Grace, now)
	if err != nil {
		return res, err
	}
	for _, p := range due {
		n, err := r.cfg.Release(ctx, p)
		res.Released += n
		if err != nil {
			return res, fmt.Errorf("release allocations of depleted project %s: %w", p, err)
		}
		if n > 0 {
			r.cfg.Log.Info("released allocations of a depleted project", "project", p, "count", n)
		}
	}
	return res, r.releaseOverBudget(ctx, &res, now)
}

// releaseOverBudget releases the running allocations of the scopes whose
// budget, with action release, is used up.
func (r *Runner) releaseOverBudget(ctx context.Context, res *TickResult, now time.Time) error {
	if r.cfg.ReleaseBudget == nil {
		return nil
	}
	over, err := budgetsToRelease(ctx, r.cfg.Pool, now)
	if err != nil {
		return err
	}
	for _, s := range over {
		n, err := r.cfg.ReleaseBudget(ctx, s.ProjectID, s.UserID)
		res.BudgetReleased += n
		if err != nil {
			return fmt.Errorf("release allocations over the budget of %s/%s: %w", s.ProjectID, s.UserID, err)
		}
		if n > 0 {
			r.cfg.Log.Info("released allocations over budget", "project", s.ProjectID, "user", s.UserID, "count", n)
		}
	}
	return nil
}
