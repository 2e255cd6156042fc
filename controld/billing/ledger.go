package billing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

const entryColumns = `SELECT id, project_id, kind, reference, amount_minor, currency, memo, actor_id,
	created_at, prev_hash, hash FROM ledger_entries`

func scanEntry(r pgx.CollectableRow) (Entry, error) {
	var e Entry
	err := r.Scan(&e.ID, &e.ProjectID, &e.Kind, &e.Reference, &e.AmountMinor, &e.Currency, &e.Memo, &e.ActorID,
		&e.CreatedAt, &e.PrevHash, &e.Hash)
	e.CreatedAt = e.CreatedAt.UTC()
	return e, err
}

// checkEntry validates e before it is booked; the database checks the
// same (CHECK constraints), this gives the caller a clear error.
func checkEntry(e Entry) error {
	switch {
	case !e.Kind.Valid():
		return fmt.Errorf("%w: unknown kind %q", ErrInvalidEntry, e.Kind)
	case e.ProjectID == "":
		return fmt.Errorf("%w: no project", ErrInvalidEntry)
	case e.Reference == "":
		return fmt.Errorf("%w: no reference", ErrInvalidEntry)
	case e.ActorID == "":
		return fmt.Errorf("%w: no actor", ErrInvalidEntry)
	case e.CreatedAt.IsZero():
		return fmt.Errorf("%w: no time", ErrInvalidEntry)
	case e.Kind == KindTopup && e.AmountMinor <= 0,
		(e.Kind == KindUsage || e.Kind == KindRefund || e.Kind == KindStorage || e.Kind == KindApp) && e.AmountMinor >= 0,
		e.Kind == KindAdjustment && e.AmountMinor == 0:
		return fmt.Errorf("%w: amount %d does not fit a %s", ErrInvalidEntry, e.AmountMinor, e.Kind)
	}
	return nil
}

// Append inserts e inside tx, chained to the project's last entry. It
// locks the account row (creating the account on its first entry), so
// appends to one account are serialised and the chain never forks; the
// ledger_entries_chain trigger fills in PrevHash and Hash (ID comes from
// the sequence). If an entry with the same (Kind, Reference) exists,
// Append returns that entry and inserted=false, and books nothing.
func Append(ctx context.Context, tx pgx.Tx, e Entry) (stored Entry, inserted bool, err error) {
	if e.Currency == "" {
		e.Currency = DefaultCurrency
	}
	if err := checkEntry(e); err != nil {
		return Entry{}, false, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO billing_accounts (project_id, currency, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (project_id) DO NOTHING`, e.ProjectID, e.Currency, e.CreatedAt); err != nil {
		return Entry{}, false, fmt.Errorf("append %s %s: account: %w", e.Kind, e.Reference, err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM billing_accounts WHERE project_id = $1 FOR UPDATE`, e.ProjectID); err != nil {
		return Entry{}, false, fmt.Errorf("append %s %s: lock account: %w", e.Kind, e.Reference, err)
	}
	// Under the account lock, a booking committed by anyone before is
	// visible (read committed: each statement sees the latest commits).
	rows, err := tx.Query(ctx, entryColumns+` WHERE kind = $1 AND reference = $2`, e.Kind, e.Reference)
	if err != nil {
		return Entry{}, false, fmt.Errorf("find %s %s: %w", e.Kind, e.Reference, err)
	}
	stored, err = pgx.CollectExactlyOneRow(rows, scanEntry)
	if err == nil {
		return stored, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, false, fmt.Errorf("find %s %s: %w", e.Kind, e.Reference, err)
	}
	rows, err = tx.Query(ctx, `INSERT INTO ledger_entries
		(project_id, seq, kind, reference, amount_minor, currency, memo, actor_id, created_at, prev_hash, hash)
		VALUES ($1, 0, $2, $3, $4, $5, $6, $7, $8, '', '')
		RETURNING id, project_id, kind, reference, amount_minor, currency, memo, actor_id, created_at, prev_hash, hash`,
		e.ProjectID, e.Kind, e.Reference, e.AmountMinor, e.Currency, e.Memo, e.ActorID, e.CreatedAt)
	if err != nil {
		return Entry{}, false, fmt.Errorf("append %s %s: %w", e.Kind, e.Reference, err)
	}
	stored, err = pgx.CollectExactlyOneRow(rows, scanEntry)
	if err != nil {
		return Entry{}, false, fmt.Errorf("append %s %s: %w", e.Kind, e.Reference, err)
	}
	return stored, true, nil
}

// Balance is the project's balance: the sum of its ledger entries.
func Balance(ctx context.Context, q Querier, projectID string) (int64, error) {
	var b int64
	if err := q.QueryRow(ctx, `SELECT coalesce(sum(amount_minor), 0)::bigint FROM ledger_entries WHERE project_id = $1`,
		projectID).Scan(&b); err != nil {
		return 0, fmt.Errorf("balance of %s: %w", projectID, err)
	}
	return b, nil
}

// Entries returns up to limit entries of a project, newest first, with
// ids below beforeID when it is positive (for paging).
func Entries(ctx context.Context, q Querier, projectID string, beforeID int64, limit int) ([]Entry, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	where, args := `WHERE project_id = $1`, []any{projectID, limit}
	if beforeID > 0 {
		where += ` AND id < $3`
		args = append(args, beforeID)
	}
	rows, err := q.Query(ctx, entryColumns+` `+where+` ORDER BY id DESC LIMIT $2`, args...)
	if err != nil {
		return nil, fmt.Errorf("list ledger of %s: %w", projectID, err)
	}
	es, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return nil, fmt.Errorf("list ledger of %s: %w", projectID, err)
	}
	return es, nil
}

// EntryHash is the chain hash of an entry that is the seq'th of its
// account: hex SHA-256 over prevHash, seq, project, kind, reference,
// amount, currency, memo, actor and created_at (Unix microseconds),
// numbers in decimal, fields separated by NUL bytes. It is the Go twin of
// the SQL function ledger_hash the database chains entries with; Verify
// recomputes every hash with it.
func EntryHash(prevHash string, seq int64, e Entry) string {
	h := sha256.New()
	for i, f := range []string{prevHash, strconv.FormatInt(seq, 10), e.ProjectID, string(e.Kind), e.Reference,
		strconv.FormatInt(e.AmountMinor, 10), e.Currency, e.Memo, e.ActorID, strconv.FormatInt(e.CreatedAt.UnixMicro(), 10)} {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}
