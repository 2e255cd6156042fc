package billing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// betweenStatements is a transaction that runs hook once, before its
// second statement: there the accrual's account lock and its reading of
// the chain heads are two statements, and another transaction may commit
// between them.
type betweenStatements struct {
	pgx.Tx
	n    int
	hook func()
}

func (b *betweenStatements) step() {
	if b.n++; b.n == 2 {
		b.hook()
	}
}

func (b *betweenStatements) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b.step()
	return b.Tx.Exec(ctx, sql, args...)
}

func (b *betweenStatements) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b.step()
	return b.Tx.Query(ctx, sql, args...)
}

// TestAccrualReadsHeadsOnlyOfAccountsItLocked: an account another
// transaction opens (the chain trigger's first entry of a project: a
// meter's final window) and commits between the accrual's lock and its
// reading of the heads was not locked, its row not yet visible to the
// lock. The accrual chained its entries on that head anyway: the
// trigger's next entry took the same seq, and each transaction waited
// for the other (TestStopVolumeMeterRacesAccrual's deadlock). Every head
// returned must be of an account the transaction holds.
func TestAccrualReadsHeadsOnlyOfAccountsItLocked(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)

	opener, err := f.app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = opener.Rollback(ctx) }()
	if _, err := opener.Exec(ctx, `INSERT INTO billing_accounts (project_id, currency, created_at) VALUES ($1, $2, $3)`,
		p, billing.DefaultCurrency, time.Now()); err != nil {
		t.Fatal(err)
	}
	committed := false
	commit := func() {
		if !committed {
			committed = true
			if err := opener.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	tx, err := f.app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	heads, err := billing.LockAccounts(ctx, &betweenStatements{Tx: tx, hook: commit}, []string{p})
	if err != nil {
		t.Fatal(err)
	}
	commit()
	for project := range heads {
		var held bool
		err := pgx.BeginFunc(ctx, f.app, func(other pgx.Tx) error {
			_, err := other.Exec(ctx, `SELECT FROM billing_accounts WHERE project_id = $1 FOR UPDATE NOWAIT`, project)
			var pgErr *pgconn.PgError
			held = errors.As(err, &pgErr) && pgErr.Code == "55P03" // lock_not_available
			if held {
				return nil
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			t.Errorf("the head of %s was read, but its account is not locked", project)
		}
	}

	// Unlocked, it is opened and locked before anything is chained on it.
	if _, ok := heads[p]; ok {
		return
	}
	again, err := billing.LockAccounts(ctx, tx, []string{p})
	if err != nil || len(again) != 1 {
		t.Fatalf("the committed account, locked again: %v, %v", again, err)
	}
}
