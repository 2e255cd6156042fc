package idle

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

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// lockKey names the advisory lock that lets one replica at a time run the
// evaluator.
const lockKey = "gpuaas.idle.evaluator"

// Config configures a Runner.
type Config struct {
	Settings
	// Pool is controld's database pool. Required.
	Pool *pgxpool.Pool
	// Mutations runs the releases (audit row, events, idempotency).
	// Required.
	Mutations *mutate.Runner
	// Released is called after a tick released allocations (controld
	// retries its queue).
	Released func()
	// Mailer, when set, also emails each warning to the project's members
	// (billing's mail configuration).
	Mailer billing.Mailer
	Now    func() time.Time
	Log    *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Pool == nil || c.Mutations == nil {
		return errors.New("idle: Pool and Mutations are required")
	}
	if err := c.Settings.CheckAndSetDefaults(); err != nil {
		return err
	}
	if c.Released == nil {
		c.Released = func() {}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Runner is the evaluator: every Interval it warns the allocations whose
// idle or maximum-duration deadline is within WarnAhead and releases
// those past it.
type Runner struct{ cfg Config }

// NewRunner returns a Runner for cfg.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg}, nil
}

// Run ticks every Interval until ctx ends (singleton.Loop).
func (r *Runner) Run(ctx context.Context) error {
	return singleton.Loop{Name: "idle tick", Interval: r.cfg.Interval, Log: r.cfg.Log,
		Tick: func(ctx context.Context) ([]any, error) {
			res, err := r.Tick(ctx)
			if err != nil || (res.Warned == 0 && res.Released == 0) {
				return nil, err
			}
			return []any{"warned", res.Warned, "released", res.Released}, nil
		}}.Run(ctx)
}

// TickResult is what one tick did.
type TickResult struct {
	// Skipped is true when another replica held the evaluator's lock.
	Skipped  bool
	Warned   int
	Released int
}

// due is an allocation to release, and why.
type due struct {
	alloc.Active
	reason string
}

// Tick runs the evaluator once: under a transaction-scoped advisory lock
// it sends the warnings that are due (alloc.notice events, once per
// deadline); after committing it releases the allocations past their
// deadline, each in a mutation of its own that checks again that it is
// still due.
func (r *Runner) Tick(ctx context.Context) (TickResult, error) {
	var res TickResult
	now := r.cfg.Now().UTC()
	var dues []due
	var mails []mail
	err := pgx.BeginFunc(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
		locked, err := singleton.TryLock(ctx, tx, lockKey)
		if err != nil {
			return fmt.Errorf("idle: %w", err)
		}
		if !locked {
			res.Skipped = true
			return nil
		}
		active, err := underPolicy(ctx, tx)
		if err != nil {
			return err
		}
		for _, a := range active {
			st, err := loadState(ctx, tx, a.ID, a.ProjectID)
			if err != nil {
				return err
			}
			d := r.cfg.decide(st, a.ActiveAt, now)
			if d.release != "" {
				dues = append(dues, due{Active: a, reason: d.release})
				continue
			}
			for _, n := range d.notices {
				m, err := r.warn(ctx, tx, a, n, now)
				if err != nil {
					return err
				}
				mails = append(mails, m)
				res.Warned++
			}
		}
		// Under controld's idle lease, warnings commit only while the
		// lease is still this replica's.
		return lease.Fence(ctx, tx)
	})
	if err != nil || res.Skipped {
		return res, err
	}
	for _, m := range mails {
		if r.cfg.Mailer == nil || len(m.to) == 0 {
			break
		}
		// Email is a courtesy: the event and the in-session notice are sent.
		if err := r.cfg.Mailer.Send(ctx, m.to, m.subject, m.body); err != nil {
			r.cfg.Log.Warn("idle warning email", "allocation", m.allocationID, "err", err)
		}
	}
	for _, d := range dues {
		ok, err := r.release(ctx, d)
		if err != nil {
			return res, err
		}
		if ok {
			res.Released++
		}
	}
	if res.Released > 0 {
		r.cfg.Released()
	}
	return res, nil
}

// underPolicy lists the active allocations an idle period or a maximum
// duration applies to (or may: an allocation's "off" is read later).
func underPolicy(ctx context.Context, tx pgx.Tx) ([]alloc.Active, error) {
	rows, err := tx.Query(ctx, `SELECT project_id FROM idle_project_policies`)
	if err != nil {
		return nil, fmt.Errorf("idle policies: %w", err)
	}
	projects, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("idle policies: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT allocation_id FROM idle_allocations
		WHERE idle_release_after_s > 0 OR max_duration_s IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("idle allocations: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("idle allocations: %w", err)
	}
	return alloc.ActiveUnder(ctx, tx, projects, ids)
}

// decision is what is due for one allocation now: a release (its reason),
// else the notices to send.
type decision struct {
	release string
	notices []api.AllocNotice
}

// decide applies the policy to an allocation active since activeAt.
func (s Settings) decide(st state, activeAt, now time.Time) decision {
	var d decision
	if st.max != nil {
		maxD := time.Duration(*st.max) * time.Second
		deadline := activeAt.Add(maxD)
		switch {
		case !now.Before(deadline):
			d.release = api.ReasonMaxDuration
			return d
		case !st.maxWarned && !now.Before(deadline.Add(-s.warnAhead(maxD))):
			d.notices = append(d.notices, api.AllocNotice{Kind: api.NoticeMaxDuration, Deadline: &deadline,
				Message: fmt.Sprintf("this allocation reaches its maximum duration of %v and will be released at %s",
					maxD, deadline.Format("15:04:05 UTC"))})
		}
	}
	if period, _ := st.period(); period > 0 {
		deadline := st.idleSince(activeAt).Add(period)
		switch {
		case !now.Before(deadline):
			d.release, d.notices = api.ReasonIdle, nil
		case (st.idleWarnedAt == nil || !st.idleWarnedAt.Equal(deadline)) && !now.Before(deadline.Add(-s.warnAhead(period))):
			d.notices = append(d.notices, api.AllocNotice{Kind: api.NoticeIdleWarning, Deadline: &deadline,
				Message: fmt.Sprintf("this allocation has been idle since %s and will be released at %s unless it is used (any session traffic counts)",
					st.idleSince(activeAt).Format("15:04:05 UTC"), deadline.Format("15:04:05 UTC"))})
		}
	}
	return d
}

// mail is a warning's email, sent after the tick committed.
type mail struct {
	allocationID  string
	to            []string
	subject, body string
}

// warn sends one notice and remembers it was sent; it returns the email
// to send once committed.
func (r *Runner) warn(ctx context.Context, tx pgx.Tx, a alloc.Active, n api.AllocNotice, now time.Time) (mail, error) {
	n.AllocationID = a.ID
	stay, err := volumes.StayNote(ctx, tx, a.ID) // the volumes that stay (docs/volumes.md)
	if err != nil {
		return mail{}, err
	}
	n.Message += stay
	members, err := project.Members(ctx, tx, a.ProjectID)
	if err != nil {
		return mail{}, err
	}
	users := make([]string, len(members))
	m := mail{allocationID: a.ID, subject: fmt.Sprintf("gpuaas: allocation %s will be released at %s", a.ID,
		n.Deadline.Format("15:04 UTC")), body: "Allocation " + a.ID + ": " + n.Message + ".\n"}
	for i, mem := range members {
		users[i] = mem.UserID
		if mem.Mailable() {
			m.to = append(m.to, mem.Email)
		}
	}
	if _, err := outbox.Enqueue(ctx, tx, now, outbox.Event{Kind: api.EventAllocNotice, Subject: a.ID,
		ProjectID: a.ProjectID, Users: users, Payload: n}); err != nil {
		return mail{}, err
	}
	// A row exists when a maximum duration applies (SetAllocation).
	sql, args := `UPDATE idle_allocations SET max_warned = true WHERE allocation_id = $1`, []any{a.ID}
	if n.Kind == api.NoticeIdleWarning {
		sql = `INSERT INTO idle_allocations (allocation_id, idle_warned_for) VALUES ($1, $2)
			ON CONFLICT (allocation_id) DO UPDATE SET idle_warned_for = EXCLUDED.idle_warned_for`
		args = append(args, *n.Deadline)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return mail{}, fmt.Errorf("remember notice of %s: %w", a.ID, err)
	}
	r.cfg.Log.Info("allocation warned", "allocation", a.ID, "kind", n.Kind, "deadline", n.Deadline)
	return m, nil
}

// errNotDue stops a release whose allocation was used, or changed,
// since the tick read it.
var errNotDue = errors.New("no longer due")

// release releases one allocation through alloc.Release, as the platform
// (SystemActor), in a mutation of its own: audit row, alloc.state events,
// idempotency. It reads the allocation's state again under a lock first:
// activity that came in meanwhile keeps it.
func (r *Runner) release(ctx context.Context, d due) (bool, error) {
	actor := alloc.Actor{UserID: SystemActor, Role: api.RoleOperator}
	_, err := r.cfg.Mutations.Run(ctx, mutate.Request{Endpoint: api.EndpointAllocRelease, ActorID: SystemActor,
		Key: "idle.release:" + d.ID, Fingerprint: []byte(d.ID + "\n" + d.reason)},
		func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM idle_allocations WHERE allocation_id = $1 FOR UPDATE`, d.ID); err != nil {
				return nil, mutate.Effect{}, fmt.Errorf("lock idle state of %s: %w", d.ID, err)
			}
			now := r.cfg.Now().UTC()
			active, err := alloc.ActiveUnder(ctx, tx, nil, []string{d.ID})
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			if len(active) != 1 {
				return nil, mutate.Effect{}, errNotDue
			}
			if err := jobKeepsIt(ctx, tx, d); err != nil {
				return nil, mutate.Effect{}, err
			}
			st, err := loadState(ctx, tx, d.ID, d.ProjectID)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			if r.cfg.decide(st, active[0].ActiveAt, now).release != d.reason {
				return nil, mutate.Effect{}, errNotDue
			}
			a, eff, err := alloc.Release(ctx, tx, actor, api.AllocReleaseRequest{ID: d.ID, Reason: d.reason}, now)
			if err != nil {
				return nil, eff, err
			}
			eff.Audit.Action = "alloc." + d.reason + "_release"
			return a, eff, nil
		})
	switch {
	case errors.Is(err, errNotDue), errors.Is(err, api.ErrConflict), errors.Is(err, api.ErrIdempotencyMismatch):
		r.cfg.Log.Info("idle release skipped", "allocation", d.ID, "reason", d.reason, "err", err)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("release %s (%s): %w", d.ID, d.reason, err)
	}
	r.cfg.Log.Info("allocation released", "allocation", d.ID, "reason", d.reason)
	return true, nil
}
