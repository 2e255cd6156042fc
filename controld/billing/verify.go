package billing

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AccountCheck is what Verify found for one account.
type AccountCheck struct {
	ProjectID string
	Entries   int64
	// BalanceMinor is the sum of the account's entries.
	BalanceMinor int64
	// CachedBalanceMinor is billing_accounts.balance_minor.
	CachedBalanceMinor int64
	// Problems is empty when the chain and the cache are sound.
	Problems []string
}

// OK reports whether the account passed.
func (c AccountCheck) OK() bool { return len(c.Problems) == 0 }

// maxProblems bounds what one account reports: a chain broken early
// breaks every later link too.
const maxProblems = 20

// Verify recomputes every account's hash chain (with EntryHash, in seq
// order) and its balance, and compares them with the cached account row.
// It reads in one repeatable-read snapshot so concurrent appends cannot
// make a sound ledger look broken.
func Verify(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}) ([]AccountCheck, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("verify ledger: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	checks := map[string]*AccountCheck{}
	var order []string
	account := func(id string) *AccountCheck {
		c := checks[id]
		if c == nil {
			c = &AccountCheck{ProjectID: id}
			checks[id] = c
			order = append(order, id)
		}
		return c
	}
	type last struct {
		seq  int64
		hash string
	}
	tails := map[string]last{}
	rows, err := tx.Query(ctx, `SELECT seq, id, project_id, kind, reference, amount_minor, currency, memo, actor_id,
		created_at, prev_hash, hash FROM ledger_entries ORDER BY project_id, seq`)
	if err != nil {
		return nil, fmt.Errorf("verify ledger: %w", err)
	}
	var seq int64
	var e Entry
	_, err = pgx.ForEachRow(rows, []any{&seq, &e.ID, &e.ProjectID, &e.Kind, &e.Reference, &e.AmountMinor, &e.Currency,
		&e.Memo, &e.ActorID, &e.CreatedAt, &e.PrevHash, &e.Hash}, func() error {
		c := account(e.ProjectID)
		t := tails[e.ProjectID]
		c.Entries++
		c.BalanceMinor += e.AmountMinor
		problem := func(format string, args ...any) {
			if len(c.Problems) < maxProblems {
				c.Problems = append(c.Problems, fmt.Sprintf("entry %d (seq %d): ", e.ID, seq)+fmt.Sprintf(format, args...))
			}
		}
		if seq != t.seq+1 {
			problem("sequence jumps from %d", t.seq)
		}
		if e.PrevHash != t.hash {
			problem("prev_hash %.12s… does not match the previous entry's hash %.12s…", e.PrevHash, t.hash)
		}
		if want := EntryHash(e.PrevHash, seq, e); e.Hash != want {
			problem("hash %.12s… does not match its contents (%.12s…)", e.Hash, want)
		}
		tails[e.ProjectID] = last{seq: seq, hash: e.Hash}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify ledger: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT project_id, balance_minor, entries, last_hash FROM billing_accounts ORDER BY project_id`)
	if err != nil {
		return nil, fmt.Errorf("verify ledger accounts: %w", err)
	}
	var id, lastHash string
	var cached, entries int64
	_, err = pgx.ForEachRow(rows, []any{&id, &cached, &entries, &lastHash}, func() error {
		c := account(id)
		c.CachedBalanceMinor = cached
		t := tails[id]
		if cached != c.BalanceMinor {
			c.Problems = append(c.Problems, fmt.Sprintf("cached balance %d ≠ sum of entries %d", cached, c.BalanceMinor))
		}
		if entries != c.Entries || entries != t.seq {
			c.Problems = append(c.Problems, fmt.Sprintf("account counts %d entries; the ledger has %d (last seq %d)",
				entries, c.Entries, t.seq))
		}
		if lastHash != t.hash {
			c.Problems = append(c.Problems, fmt.Sprintf("account's last hash %.12s… ≠ last entry's %.12s…", lastHash, t.hash))
		}
		delete(tails, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify ledger accounts: %w", err)
	}
	for id := range tails {
		c := checks[id]
		c.Problems = append(c.Problems, "entries without an account row")
	}
	out := make([]AccountCheck, 0, len(order))
	for _, id := range order {
		out = append(out, *checks[id])
	}
	return out, nil
}
