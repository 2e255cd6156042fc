package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

type noticeKind int

const (
	noticeLow noticeKind = iota
	noticeDepleted
	noticeBudget
)

// notice is an email to send once the transaction that decided it commits.
type notice struct {
	kind          noticeKind
	projectID     string
	emails        []string
	subject, body string
}

// evaluate moves accounts between normal, low and depleted, in tx:
//   - balance below the threshold and not yet warned: one
//     billing.low_balance event (the warning is re-armed once the balance
//     is back at or above the threshold, so each crossing warns once);
//   - balance at or below zero and not yet depleted: depleted_at is set
//     and a billing.depleted event names the end of the grace period;
//   - balance above zero again: depleted_at is cleared.
func evaluate(ctx context.Context, tx pgx.Tx, defaultThreshold int64, grace time.Duration, now time.Time) ([]notice, error) {
	rows, err := tx.Query(ctx, `SELECT a.project_id, a.balance_minor, a.currency,
		coalesce(a.low_balance_threshold_minor, $1), a.low_balance_warned, a.depleted_at IS NOT NULL
		FROM billing_accounts a
		WHERE (a.balance_minor < coalesce(a.low_balance_threshold_minor, $1)) <> a.low_balance_warned
		   OR (a.balance_minor <= 0) <> (a.depleted_at IS NOT NULL)
		ORDER BY a.project_id FOR UPDATE OF a`, defaultThreshold)
	if err != nil {
		return nil, fmt.Errorf("evaluate accounts: %w", err)
	}
	type acct struct {
		id, name, currency string
		balance, threshold int64
		warned, depleted   bool
	}
	accts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (acct, error) {
		var a acct
		err := r.Scan(&a.id, &a.balance, &a.currency, &a.threshold, &a.warned, &a.depleted)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("evaluate accounts: %w", err)
	}
	var notes []notice
	for _, a := range accts {
		low := a.balance < a.threshold
		depleted := a.balance <= 0
		if _, err := tx.Exec(ctx, `UPDATE billing_accounts SET low_balance_warned = $2,
			depleted_at = CASE WHEN NOT $3 THEN NULL ELSE coalesce(depleted_at, $4) END WHERE project_id = $1`,
			a.id, low, depleted, now); err != nil {
			return nil, fmt.Errorf("update account %s: %w", a.id, err)
		}
		if a.name, err = project.Name(ctx, tx, a.id); err != nil {
			return nil, err
		}
		members, err := project.Members(ctx, tx, a.id)
		if err != nil {
			return nil, err
		}
		users := make([]string, len(members))
		var emails []string
		for i, m := range members {
			users[i] = m.UserID
			if m.Mailable() {
				emails = append(emails, m.Email)
			}
		}
		bal := api.FormatMoney(a.balance, a.currency)
		if low && !a.warned {
			ev := outbox.Event{Kind: api.EventBillingLowBalance, Subject: a.id, ProjectID: a.id, Users: users,
				Payload: api.BillingLowBalance{ProjectID: a.id, BalanceMinor: a.balance, ThresholdMinor: a.threshold, Currency: a.currency}}
			if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
				return nil, err
			}
			notes = append(notes, notice{kind: noticeLow, projectID: a.id, emails: emails,
				subject: fmt.Sprintf("gpuaas: project %s is low on credit (%s)", a.name, bal),
				body: fmt.Sprintf("The balance of project %s is %s, below its warning threshold of %s.\n"+
					"Top it up with `gpuaas billing topup` to keep its allocations running.\n",
					a.name, bal, api.FormatMoney(a.threshold, a.currency))})
		}
		if depleted && !a.depleted {
			ends := now.Add(grace)
			ev := outbox.Event{Kind: api.EventBillingDepleted, Subject: a.id, ProjectID: a.id, Users: users,
				Payload: api.BillingDepleted{ProjectID: a.id, BalanceMinor: a.balance, Currency: a.currency, GraceEndsAt: ends}}
			if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
				return nil, err
			}
			notes = append(notes, notice{kind: noticeDepleted, projectID: a.id, emails: emails,
				subject: fmt.Sprintf("gpuaas: project %s has run out of credit", a.name),
				body: fmt.Sprintf("The balance of project %s is %s. Unless it is topped up by %s,\n"+
					"all of its allocations will be released.\n", a.name, bal, ends.Format(time.RFC1123))})
		}
	}
	return notes, nil
}

// depletedPastGrace lists the accounts at or below zero whose grace period
// is over.
func depletedPastGrace(ctx context.Context, q Querier, grace time.Duration, now time.Time) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT project_id FROM billing_accounts
		WHERE balance_minor <= 0 AND depleted_at <= $1 ORDER BY project_id`, now.Add(-grace))
	if err != nil {
		return nil, fmt.Errorf("depleted accounts: %w", err)
	}
	ps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("depleted accounts: %w", err)
	}
	return ps, nil
}

// StillDepleted reports, in tx, whether a project's account is still at
// or below zero and depleted for longer than grace. It share-locks the
// account row, so a top-up (whose ledger append locks it too) waits for
// tx: a release never goes ahead on a balance that has just turned
// positive.
func StillDepleted(ctx context.Context, tx pgx.Tx, projectID string, grace time.Duration, now time.Time) (bool, error) {
	var due bool
	err := tx.QueryRow(ctx, `SELECT balance_minor <= 0 AND depleted_at IS NOT NULL AND depleted_at <= $2
		FROM billing_accounts WHERE project_id = $1 FOR SHARE`, projectID, now.Add(-grace)).Scan(&due)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check depleted %s: %w", projectID, err)
	}
	return due, nil
}
