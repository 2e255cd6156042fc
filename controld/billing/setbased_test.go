package billing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// TestAccrualTablesHaveNoRowInsertTriggers: an accrual window inserts a
// row per meter into usage_charges (or volume_charges) and ledger_entries,
// and nothing may run once per inserted row: the checks are statement
// triggers over the statement's rows (migrations 0016, 0034). A foreign
// key is a row trigger (one RI query per row: a third of the accrual's
// database time at 100,000 allocations); the only row trigger allowed is
// ledger_entries_chain, whose WHEN clause skips the entries that come
// chained (the accrual's). This counts triggers, not time, so the
// machine's load cannot move it; the benchmark has the time.
func TestAccrualTablesHaveNoRowInsertTriggers(t *testing.T) {
	f := newFixture(t)
	rows, err := f.owner.Query(context.Background(), `SELECT tgrelid::regclass::text, tgname, tgqual IS NOT NULL
		FROM pg_trigger
		WHERE tgrelid IN ('ledger_entries'::regclass, 'usage_charges'::regclass, 'volume_charges'::regclass)
			AND tgtype & 1 = 1 AND tgtype & 4 = 4 AND tgenabled <> 'D'
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	var table, name string
	var when bool
	seen := 0
	_, err = pgx.ForEachRow(rows, []any{&table, &name, &when}, func() error {
		seen++
		if table == "ledger_entries" && name == "ledger_entries_chain" && when {
			return nil
		}
		t.Errorf("row-level insert trigger %s on %s (WHEN: %v); want statement-level checks only", name, table, when)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no row trigger at all: ledger_entries_chain (for Append) is missing, the query proves nothing")
	}
}

// TestChargesNeedTheirMeter: the rule the foreign keys of usage_charges
// and volume_charges kept, now checked once per statement — a charge of a
// meter that does not exist fails its statement, which inserts nothing,
// for the application's role and the owner; and an entry of a project
// that has no account (or does not exist) is refused as before.
func TestChargesNeedTheirMeter(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a := f.activeAllocation(t, p, "h200-slice", 1, start)
	vol := f.volume(t, p, gib, 10, start)
	for _, who := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"app role", f.app}, {"owner", f.owner}} {
		for _, tc := range []struct {
			name, sql, table string
			args             []any
			code             string
		}{
			{"usage charge without meter", `INSERT INTO usage_charges (allocation_id, project_id, currency, window_start,
				window_end, start_seconds, end_seconds, amount_minor, created_at)
				VALUES ($1, $2, 'usd', $3, $3::timestamptz + interval '1 minute', 0, 60, 5, $3),
				       ($1 || '-nope', $2, 'usd', $3, $3::timestamptz + interval '1 minute', 0, 60, 5, $3)`,
				"usage_charges", []any{a, p, start}, "23503"},
			{"volume charge without meter", `INSERT INTO volume_charges (meter_id, volume_id, project_id, currency,
				window_start, window_end, start_seconds, end_seconds, amount_minor, created_at)
				VALUES ($1 || '.1', $1, $2, 'usd', $3, $3::timestamptz + interval '1 minute', 0, 60, 0, $3),
				       ($1 || '.9', $1, $2, 'usd', $3, $3::timestamptz + interval '1 minute', 0, 60, 0, $3)`,
				"volume_charges", []any{vol, p, start}, "23503"},
		} {
			t.Run(who.name+"/"+tc.name, func(t *testing.T) {
				_, err := who.pool.Exec(ctx, tc.sql, tc.args...)
				if got := pgCode(err); got != tc.code {
					t.Errorf("got %v; want SQLSTATE %s", err, tc.code)
				}
				var n int
				if err := f.owner.QueryRow(ctx, `SELECT count(*) FROM `+tc.table).Scan(&n); err != nil || n != 0 {
					t.Errorf("%s holds %d rows (%v) after the refused statement; want 0", tc.table, n, err)
				}
			})
		}
	}
	noAccount := f.project(t)
	for _, project := range []string{noAccount, "no-such-project"} {
		e := billing.Entry{ProjectID: project, Kind: billing.KindAdjustment, Reference: "orphan-" + project,
			AmountMinor: 10, Currency: "usd", Memo: "m", ActorID: "test", CreatedAt: start}
		_, err := f.app.CopyFrom(ctx, pgx.Identifier{"ledger_entries"}, ledgerCopyColumns, pgx.CopyFromRows([][]any{{
			e.ProjectID, int64(1), string(e.Kind), e.Reference, e.AmountMinor, e.Currency, e.Memo, e.ActorID, e.CreatedAt,
			"", billing.EntryHash("", 1, e)}}))
		if err == nil {
			t.Errorf("entry of %s (no account) booked; want the statement refused", project)
		}
	}
	mustVerify(t, f.owner)
}

// TestMetersAndAccountsArePermanent: what billing's records refer to —
// meters (the charges name them), accounts (the ledger's entries belong
// to them, and they to their projects) — can be neither deleted,
// truncated nor re-keyed, by the application's role or the owner, so a
// charge or entry a statement checked keeps what it refers to.
func TestMetersAndAccountsArePermanent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p, other := f.project(t), f.project(t)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	appendEntry(t, f.app, credit(p, 100_000, start))
	a := f.activeAllocation(t, p, "h200-slice", 1, start)
	vol := f.volume(t, p, gib, 10, start)
	err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
		_, err := billing.Accrue(ctx, tx, start.Add(time.Hour), start.Add(time.Hour))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"app role", f.app}, {"owner", f.owner}} {
		for _, stmt := range []struct {
			sql  string
			args []any
		}{
			{`DELETE FROM billing_meters WHERE allocation_id = $1`, []any{a}},
			{`UPDATE billing_meters SET allocation_id = allocation_id || 'x' WHERE allocation_id = $1`, []any{a}},
			{`TRUNCATE billing_meters CASCADE`, nil},
			{`DELETE FROM volume_meters WHERE volume_id = $1`, []any{vol}},
			{`UPDATE volume_meters SET meter_id = meter_id || 'x' WHERE volume_id = $1`, []any{vol}},
			{`TRUNCATE volume_meters CASCADE`, nil},
			{`DELETE FROM billing_accounts WHERE project_id = $1`, []any{p}},
			{`UPDATE billing_accounts SET project_id = $2 WHERE project_id = $1`, []any{p, other}},
			{`TRUNCATE billing_accounts CASCADE`, nil},
		} {
			t.Run(who.name+"/"+strings.Join(strings.Fields(stmt.sql)[:3], " "), func(t *testing.T) {
				if _, err := who.pool.Exec(ctx, stmt.sql, stmt.args...); err == nil {
					t.Errorf("%s: allowed; want it refused", stmt.sql)
				}
			})
		}
	}
	var meters, volumeMeters, accounts, charges, volumeCharges int
	if err := f.owner.QueryRow(ctx, `SELECT (SELECT count(*) FROM billing_meters WHERE allocation_id = $1),
		(SELECT count(*) FROM volume_meters WHERE volume_id = $2), (SELECT count(*) FROM billing_accounts WHERE project_id = $3),
		(SELECT count(*) FROM usage_charges WHERE allocation_id = $1), (SELECT count(*) FROM volume_charges WHERE volume_id = $2)`,
		a, vol, p).Scan(&meters, &volumeMeters, &accounts, &charges, &volumeCharges); err != nil {
		t.Fatal(err)
	}
	if meters != 1 || volumeMeters != 1 || accounts != 1 || charges != 1 || volumeCharges != 1 {
		t.Errorf("after the attempts: %d meters, %d volume meters, %d accounts, %d charges, %d volume charges; want 1 each",
			meters, volumeMeters, accounts, charges, volumeCharges)
	}
	mustVerify(t, f.owner)
}
