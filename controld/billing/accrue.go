package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// accrualBatchMeters bounds the meters one batch of accounts charges (a
// project larger than that is a batch of its own): it bounds the rows one
// statement returns and the locks it holds. A variable so that tests can
// make batches small.
var accrualBatchMeters = 50_000

// Accrue charges every running meter up to upTo (see windowsSQL and
// chargeSQL for the rounding rule and why retries and concurrent runs
// charge each window once); now stamps the rows. The accounts are charged
// in batches of whole accounts, each in a constant number of statements
// whatever its size: lock the accounts and read the head of their chains,
// record every due window in one statement, and COPY the ledger entries,
// chained here (EntryHash), in one more. The database checks the chains of
// the COPY once for the whole statement (ledger_entries_check, migration
// 0016), so no entry can be booked off its account's chain; nothing
// runs once per row (migration 0034: the charges' meters are checked once
// per statement too, docs/decisions/0038-set-based-ledger.md). Volumes'
// running segments are charged in the same batches, after the
// allocations' meters, their storage entries in the same COPY
// (volumemeter.go, docs/decisions/0024-volume-meters.md).
func Accrue(ctx context.Context, tx pgx.Tx, upTo, now time.Time) (AccrualResult, error) {
	var r AccrualResult
	// Hashes cover created_at in microseconds, as the database stores it.
	now = now.Truncate(time.Microsecond)
	restore, err := indexLookupsOnly(ctx, tx)
	if err != nil {
		return r, err
	}
	batches, err := accrualBatches(ctx, tx)
	if err != nil {
		return r, err
	}
	for _, projects := range batches {
		b, err := accrueBatchRetrying(ctx, tx, projects, upTo, now)
		if err != nil {
			return r, err
		}
		r.Windows += b.Windows
		r.Entries += b.Entries
		r.AmountMinor += b.AmountMinor
	}
	return r, restore()
}

// indexLookupsOnly turns sequential scans off in tx (SET LOCAL) and
// returns the function that turns them back to what they were. Each
// meter's last window must be found through the primary key whatever the
// statistics say: usage_charges grows by a row per meter each window, and
// a plan made while it looked small (empty at the first window, or not
// analysed since) scans it once per meter, which is quadratic.
func indexLookupsOnly(ctx context.Context, tx pgx.Tx) (restore func() error, err error) {
	var was string
	if err := tx.QueryRow(ctx, `SELECT current_setting('enable_seqscan'), set_config('enable_seqscan', 'off', true)`).Scan(
		&was, new(string)); err != nil {
		return nil, fmt.Errorf("accrue usage: %w", err)
	}
	return func() error {
		if _, err := tx.Exec(ctx, `SELECT set_config('enable_seqscan', $1, true)`, was); err != nil {
			return fmt.Errorf("accrue usage: %w", err)
		}
		return nil
	}, nil
}

// accrualBatches groups the projects with running meters, in project
// order, into batches of at most accrualBatchMeters meters.
func accrualBatches(ctx context.Context, tx pgx.Tx) ([][]string, error) {
	// Running volume segments and app meters count as meters
	// (volumemeter.go, appmeter.go).
	rows, err := tx.Query(ctx, `SELECT project_id, sum(n)::bigint FROM (
			SELECT project_id, count(*) AS n FROM billing_meters WHERE stopped_at IS NULL GROUP BY project_id
			UNION ALL
			SELECT project_id, count(*) FROM volume_meters WHERE stopped_at IS NULL GROUP BY project_id
			UNION ALL
			SELECT project_id, count(*) FROM app_meters WHERE stopped_at IS NULL GROUP BY project_id) m
		GROUP BY project_id ORDER BY project_id`)
	if err != nil {
		return nil, fmt.Errorf("accrue usage: running meters: %w", err)
	}
	var batches [][]string
	var batch []string
	var size int64
	var project string
	var meters int64
	_, err = pgx.ForEachRow(rows, []any{&project, &meters}, func() error {
		if len(batch) > 0 && size+meters > int64(accrualBatchMeters) {
			batches = append(batches, batch)
			batch, size = nil, 0
		}
		batch = append(batch, project)
		size += meters
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("accrue usage: running meters: %w", err)
	}
	if len(batch) > 0 {
		batches = append(batches, batch)
	}
	return batches, nil
}

// seqConflictRetries bounds the retries of a batch whose COPY met an entry
// with one of its seqs.
const seqConflictRetries = 3

// accrueBatchRetrying runs accrueBatch in a savepoint and runs it again
// (reading the chain heads again) when its COPY met an entry booked with
// one of the seqs it chained. TestStopMeterRacesAccrual saw that about
// once in 30 runs: a final window booked by a release racing the batch
// while the batch had read the head of an account it had not locked (see
// lockAccounts, which now reads only the heads of accounts it locked).
// The retry stays as a second line: the unique (project_id, seq) and the
// chain check keep the ledger right either way, and a retry books the
// batch on the new head.
func accrueBatchRetrying(ctx context.Context, tx pgx.Tx, projects []string, upTo, now time.Time) (AccrualResult, error) {
	for attempt := 0; ; attempt++ {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return AccrualResult{}, fmt.Errorf("accrue usage: %w", err)
		}
		r, err := accrueBatch(ctx, sp, projects, upTo, now)
		if err == nil {
			return r, sp.Commit(ctx)
		}
		_ = sp.Rollback(ctx)
		var pgErr *pgconn.PgError
		// 23505: unique_violation.
		if attempt < seqConflictRetries && errors.As(err, &pgErr) && pgErr.Code == "23505" &&
			pgErr.ConstraintName == "ledger_entries_project_id_seq_key" {
			continue
		}
		return r, err
	}
}

// chainHead is where an account's chain ends: its last seq and hash.
type chainHead struct {
	seq  int64
	hash string
}

// lockAccounts locks the accounts of projects, in project order (the
// order every batch locks in), and returns the head of each account it
// locked, read from the ledger itself once the locks are held (a statement
// of its own: the locking statement's snapshot may predate the entries of
// the transaction it waited for). Only the accounts the locking statement
// returned are read: an account another transaction opened and committed
// between the two statements was not locked (its row was not yet visible
// to the first) and is missing from the map like one that does not exist,
// so the caller opens and locks it (openAccounts) before chaining entries
// onto it. Reading its head unlocked let a final window chained by the
// row trigger take the same seq: a deadlock, the batch's COPY waiting on
// that entry's transaction while it waited for the account.
func lockAccounts(ctx context.Context, tx pgx.Tx, projects []string) (map[string]chainHead, error) {
	rows, err := tx.Query(ctx, `SELECT project_id FROM billing_accounts WHERE project_id = ANY($1)
		ORDER BY project_id FOR UPDATE`, projects)
	if err != nil {
		return nil, fmt.Errorf("lock accounts: %w", err)
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("lock accounts: %w", err)
	}
	heads := make(map[string]chainHead, len(locked))
	if len(locked) == 0 {
		return heads, nil
	}
	rows, err = tx.Query(ctx, `SELECT a.project_id, coalesce(l.seq, 0), coalesce(l.hash, '')
		FROM billing_accounts a
		LEFT JOIN LATERAL (SELECT e.seq, e.hash FROM ledger_entries e WHERE e.project_id = a.project_id
			ORDER BY e.seq DESC LIMIT 1) l ON true
		WHERE a.project_id = ANY($1)`, locked)
	if err != nil {
		return nil, fmt.Errorf("read chain heads: %w", err)
	}
	var project string
	var h chainHead
	_, err = pgx.ForEachRow(rows, []any{&project, &h.seq, &h.hash}, func() error {
		heads[project] = h
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chain heads: %w", err)
	}
	return heads, nil
}

// accrueSQL records the due windows of the running meters of the projects
// $3 and returns, in booking order, each window with the reference and
// memo of its ledger entry.
var accrueSQL = fmt.Sprintf(windowsSQL, `m.stopped_at IS NULL AND m.project_id = ANY($3)`) + `
SELECT project_id, amount_minor, currency, ` + fmt.Sprintf(usageReference+`, `+usageMemo) + `
FROM charged ORDER BY project_id, allocation_id`

// ledgerColumns are the columns the accrual COPYs into ledger_entries.
var ledgerColumns = []string{"project_id", "seq", "kind", "reference", "amount_minor", "currency", "memo", "actor_id",
	"created_at", "prev_hash", "hash"}

// accrueBatch charges the running meters of projects (see Accrue).
func accrueBatch(ctx context.Context, tx pgx.Tx, projects []string, upTo, now time.Time) (AccrualResult, error) {
	var r AccrualResult
	heads, err := lockAccounts(ctx, tx, projects)
	if err != nil {
		return r, fmt.Errorf("accrue usage: %w", err)
	}
	rows, err := tx.Query(ctx, accrueSQL, upTo, now, projects)
	if err != nil {
		return r, fmt.Errorf("accrue usage: %w", err)
	}
	var entries []Entry
	var e Entry
	var amount int64
	_, err = pgx.ForEachRow(rows, []any{&e.ProjectID, &amount, &e.Currency, &e.Reference, &e.Memo}, func() error {
		r.Windows++
		if amount > 0 {
			e.Kind, e.AmountMinor, e.ActorID, e.CreatedAt = KindUsage, -amount, SystemActor, now
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("accrue usage: %w", err)
	}
	if entries, err = appendVolumeEntries(ctx, tx, entries, &r, projects, upTo, now); err != nil {
		return r, err
	}
	if entries, err = appendAppEntries(ctx, tx, entries, &r, projects, upTo, now); err != nil {
		return r, err
	}
	if len(entries) == 0 {
		return r, nil
	}
	if err := openAccounts(ctx, tx, entries, heads, now); err != nil {
		return r, fmt.Errorf("accrue usage: %w", err)
	}
	rowsIn := make([][]any, len(entries))
	for i, e := range entries {
		h := heads[e.ProjectID]
		seq := h.seq + 1
		e.PrevHash, e.Hash = h.hash, EntryHash(h.hash, seq, e)
		heads[e.ProjectID] = chainHead{seq: seq, hash: e.Hash}
		rowsIn[i] = []any{e.ProjectID, seq, string(e.Kind), e.Reference, e.AmountMinor, e.Currency, e.Memo, e.ActorID,
			e.CreatedAt, e.PrevHash, e.Hash}
		r.AmountMinor -= e.AmountMinor
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{"ledger_entries"}, ledgerColumns, pgx.CopyFromRows(rowsIn))
	if err != nil {
		return r, fmt.Errorf("accrue usage: book entries: %w", err)
	}
	r.Entries = n
	return r, nil
}

// openAccounts creates the accounts of the entries' projects that have
// none yet (in the currency of their first entry, as the chain trigger
// does for Append) and locks them, adding their heads to heads: an account
// another transaction opened meanwhile may have entries already.
func openAccounts(ctx context.Context, tx pgx.Tx, entries []Entry, heads map[string]chainHead, now time.Time) error {
	var projects, currencies []string
	for _, e := range entries {
		if _, ok := heads[e.ProjectID]; !ok && (len(projects) == 0 || projects[len(projects)-1] != e.ProjectID) {
			projects, currencies = append(projects, e.ProjectID), append(currencies, e.Currency)
		}
	}
	if len(projects) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO billing_accounts (project_id, currency, created_at)
		SELECT p, c, $3 FROM unnest($1::text[], $2::text[]) AS n (p, c) ORDER BY p
		ON CONFLICT (project_id) DO NOTHING`, projects, currencies, now); err != nil {
		return fmt.Errorf("open accounts: %w", err)
	}
	// Each account is now this transaction's or committed (the insert
	// waited for the one that opened it), so visible to the lock.
	opened, err := lockAccounts(ctx, tx, projects)
	if err != nil {
		return err
	}
	for _, p := range projects {
		h, ok := opened[p]
		if !ok {
			return fmt.Errorf("open accounts: the account of %s was not locked", p)
		}
		heads[p] = h
	}
	return nil
}
