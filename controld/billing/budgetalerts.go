package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// BudgetReleaseFunc releases the running allocations of a budget's scope
// (userID "" for the whole project) whose spend reached its cap with
// action release, through the allocation state machine, and returns how
// many it released. It must re-check, in each release's transaction, that
// the budget is still over (see StillOverBudget): it may have been raised
// or cleared in between. controld provides it.
type BudgetReleaseFunc func(ctx context.Context, projectID, userID string) (int, error)

// BudgetScope names a budget: a project, or a user in it.
type BudgetScope struct {
	ProjectID, UserID string
}

// evaluateBudgets tells, in tx, the budgets whose spend crossed a level:
// BudgetWarnPercent of the cap, then the cap. Each crossing emits one
// billing.budget event to the project's members and an alloc.notice of
// kind budget for each running allocation of the scope, and is told once
// per period: the budget remembers the period it was told in, and forgets
// it when the spend is back under (the cap was raised), so the next
// crossing is told again. It returns the emails to send.
func evaluateBudgets(ctx context.Context, tx pgx.Tx, now time.Time) ([]notice, error) {
	bs, err := readBudgets(ctx, tx, `WHERE b.amount_minor IS NOT NULL ORDER BY b.project_id, b.user_id FOR UPDATE`, now)
	if err != nil {
		return nil, err
	}
	var notes []notice
	for _, b := range bs {
		warn := b.SpentMinor*100 >= b.AmountMinor*api.BudgetWarnPercent
		capped := b.SpentMinor >= b.AmountMinor
		warned := b.warnedPeriod != nil && b.warnedPeriod.Equal(b.PeriodStart)
		told := b.cappedPeriod != nil && b.cappedPeriod.Equal(b.PeriodStart)
		if warn == warned && capped == told {
			continue
		}
		var warnedPeriod, cappedPeriod *time.Time
		if warn {
			warnedPeriod = &b.PeriodStart
		}
		if capped {
			cappedPeriod = &b.PeriodStart
		}
		if _, err := tx.Exec(ctx, `UPDATE budgets SET warned_period = $3, capped_period = $4
			WHERE project_id = $1 AND user_id = $2`, b.ProjectID, b.UserID, warnedPeriod, cappedPeriod); err != nil {
			return nil, fmt.Errorf("update budget of %s: %w", b.ProjectID, err)
		}
		for _, level := range []struct {
			crossed bool
			percent int
		}{{warn && !warned, api.BudgetWarnPercent}, {capped && !told, 100}} {
			if !level.crossed {
				continue
			}
			n, err := tellBudgetCrossing(ctx, tx, b, level.percent, now)
			if err != nil {
				return nil, err
			}
			notes = append(notes, n)
		}
	}
	return notes, nil
}

// tellBudgetCrossing enqueues the events of one crossing and returns its
// email.
func tellBudgetCrossing(ctx context.Context, tx pgx.Tx, b Budget, percent int, now time.Time) (notice, error) {
	name, err := project.Name(ctx, tx, b.ProjectID)
	if err != nil {
		return notice{}, err
	}
	members, err := project.Members(ctx, tx, b.ProjectID)
	if err != nil {
		return notice{}, err
	}
	users := make([]string, len(members))
	var emails []string
	whose := "project " + name + "'s"
	for i, m := range members {
		users[i] = m.UserID
		if m.Mailable() && (b.UserID == "" || m.UserID == b.UserID || m.Role == api.ProjectOwner) {
			emails = append(emails, m.Email)
		}
		if m.UserID == b.UserID {
			whose = m.Email + "'s"
		}
	}
	money := func(v int64) string { return api.FormatMoney(v, b.Currency) }
	resets := b.PeriodEnd.UTC().Format("2006-01-02 15:04 UTC")
	line := fmt.Sprintf("%s %s budget is %.0f%% spent (%s of %s, resets %s)", whose, b.Period, b.Percent(),
		money(b.SpentMinor), money(b.AmountMinor), resets)
	subject := fmt.Sprintf("gpuaas: %s %s budget is %d%% spent", whose, b.Period, percent)
	if percent == 100 {
		line += ": new allocations are refused until it resets"
		subject = fmt.Sprintf("gpuaas: %s %s budget is used up", whose, b.Period)
		if b.Action == api.BudgetRelease {
			line += "; running allocations are being released"
		}
	}
	ev := outbox.Event{Kind: api.EventBillingBudget, Subject: b.ProjectID, ProjectID: b.ProjectID, Users: users,
		Payload: api.BudgetCrossing{ProjectID: b.ProjectID, UserID: b.UserID, Percent: percent, SpentMinor: b.SpentMinor,
			AmountMinor: b.AmountMinor, Currency: b.Currency, Period: b.Period, PeriodEnd: b.PeriodEnd.UTC(), Action: b.Action}}
	if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
		return notice{}, err
	}
	running, err := RunningInScope(ctx, tx, b.ProjectID, b.UserID)
	if err != nil {
		return notice{}, err
	}
	for _, id := range running {
		n := api.AllocNotice{AllocationID: id, Kind: api.NoticeBudget, Message: "gpuaas: " + line}
		if percent == 100 && b.Action == api.BudgetRelease {
			n.Deadline = &now
		}
		if _, err := outbox.Enqueue(ctx, tx, now, outbox.Event{Kind: api.EventAllocNotice, Subject: id,
			ProjectID: b.ProjectID, Users: users, Payload: n}); err != nil {
			return notice{}, err
		}
	}
	return notice{kind: noticeBudget, projectID: b.ProjectID, emails: emails, subject: subject, body: line + ".\n" +
		"`gpuaas billing budget get` shows where it stands; a project owner changes it with `gpuaas billing budget set`.\n"}, nil
}

// budgetsToRelease lists the scopes of the budgets with action release
// whose spend is at or over their cap and that still have running
// allocations.
func budgetsToRelease(ctx context.Context, q Querier, now time.Time) ([]BudgetScope, error) {
	bs, err := readBudgets(ctx, q, `WHERE b.amount_minor IS NOT NULL AND b.action = 'release'
		AND EXISTS (SELECT 1 FROM billing_meters m WHERE m.project_id = b.project_id AND m.stopped_at IS NULL
			AND (b.user_id = '' OR m.user_id = b.user_id))
		ORDER BY b.project_id, b.user_id`, now)
	if err != nil {
		return nil, err
	}
	var out []BudgetScope
	for _, b := range bs {
		if b.SpentMinor >= b.AmountMinor {
			out = append(out, BudgetScope{ProjectID: b.ProjectID, UserID: b.UserID})
		}
	}
	return out, nil
}
