package billing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// TestAccrualQuadraticLastWindowScan is the regression test of the
// accrual window that took a minute at 100,000 allocations: with
// usage_charges empty (or small) when last analysed, the planner looked up
// each meter's last window with a sequential scan of usage_charges, once
// per meter. Every lookup must go through the primary key whatever the
// statistics say; pg_stat_xact_user_tables counts the scans of the
// accrual's own transaction.
func TestAccrualQuadraticLastWindowScan(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for range 20 {
		f.activeAllocation(t, p, "h200-slice", 1, start)
	}
	if _, err := f.owner.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for w := 1; w <= 2; w++ {
		upTo := start.Add(time.Duration(w) * time.Minute)
		err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
			r, err := billing.Accrue(ctx, tx, upTo, upTo)
			if err != nil {
				return err
			}
			if r.Windows != 20 {
				t.Errorf("window %d: %+v; want 20 windows", w, r)
			}
			var seq, idx int64
			if err := tx.QueryRow(ctx, `SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables
				WHERE relname = 'usage_charges'`).Scan(&seq, &idx); err != nil {
				return err
			}
			if seq != 0 || idx < 20 {
				t.Errorf("window %d: %d sequential and %d index scans of usage_charges; want 0 and one per meter (20)", w, seq, idx)
			}
			var seqscan string
			if err := tx.QueryRow(ctx, `SELECT current_setting('enable_seqscan')`).Scan(&seqscan); err != nil {
				return err
			}
			if seqscan != "on" {
				t.Errorf("enable_seqscan after Accrue: %s; want it back on", seqscan)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, f.app)
}

// TestAccrualInBatchesOfAccounts charges projects of different sizes in
// batches of at most 5 meters (a project of 7 is a batch of its own): one
// project has entries already, one has no account yet. Every window is
// charged once, each account's chain continues where it was, and the
// result is the same as in one batch.
func TestAccrualInBatchesOfAccounts(t *testing.T) {
	run := func(t *testing.T, batch int) (billing.AccrualResult, map[string]int64) {
		defer billing.SetAccrualBatchMeters(batch)()
		f := newFixture(t)
		start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		balances := map[string]int64{}
		var projects []string
		for i, size := range []int{1, 3, 7, 2, 4} {
			p := f.project(t)
			projects = append(projects, p)
			if i == 1 {
				appendEntry(t, f.app, credit(p, 10_000, start))
			}
			for range size {
				f.activeAllocation(t, p, "h200-slice", 2, start)
			}
		}
		var total billing.AccrualResult
		for w := 1; w <= 3; w++ {
			r := accrue(t, f.app, start.Add(time.Duration(w)*10*time.Minute))
			total.Windows += r.Windows
			total.Entries += r.Entries
			total.AmountMinor += r.AmountMinor
		}
		for i, p := range projects {
			bal, err := billing.Balance(context.Background(), f.app, p)
			if err != nil {
				t.Fatal(err)
			}
			balances[string(rune('a'+i))] = bal
		}
		if checks := mustVerify(t, f.app); len(checks) != len(projects) {
			t.Errorf("verified %d accounts; want %d", len(checks), len(projects))
		}
		return total, balances
	}
	one, oneBal := run(t, 1_000)
	batched, batchedBal := run(t, 5)
	want := billing.AccrualResult{Windows: 3 * 17, Entries: 3 * 17, AmountMinor: 17 * cost(350, 2, 30*60)}
	for _, got := range []billing.AccrualResult{one, batched} {
		if got != want {
			t.Errorf("accrued %+v; want %+v", got, want)
		}
	}
	for k, v := range oneBal {
		if batchedBal[k] != v {
			t.Errorf("project %s: balance %d in batches of 5, %d in one batch", k, batchedBal[k], v)
		}
	}
	if oneBal["b"] != 10_000-3*cost(350, 2, 30*60) {
		t.Errorf("credited project's balance %d; want %d", oneBal["b"], 10_000-3*cost(350, 2, 30*60))
	}
}

// TestLedgerRefusesEntriesOffTheChain inserts entries that come with
// their own seq and hashes, as the accrual's COPY does, straight into the
// ledger as the application's role: a correctly chained one is booked;
// one with a wrong hash, a wrong prev_hash, a gap or a repeated seq, or
// into an account of another currency, fails the statement, which books
// nothing.
func TestLedgerRefusesEntriesOffTheChain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	head, _ := appendEntry(t, f.app, credit(p, 1000, at))
	entry := func(ref string) billing.Entry {
		return billing.Entry{ProjectID: p, Kind: billing.KindAdjustment, Reference: ref, AmountMinor: -10,
			Currency: "usd", Memo: "m", ActorID: "test", CreatedAt: at}
	}
	insert := func(rows ...[]any) error {
		_, err := f.app.CopyFrom(ctx, pgx.Identifier{"ledger_entries"}, []string{"project_id", "seq", "kind", "reference",
			"amount_minor", "currency", "memo", "actor_id", "created_at", "prev_hash", "hash"}, pgx.CopyFromRows(rows))
		return err
	}
	row := func(e billing.Entry, seq int64, prev, hash string) []any {
		return []any{e.ProjectID, seq, string(e.Kind), e.Reference, e.AmountMinor, e.Currency, e.Memo, e.ActorID,
			e.CreatedAt, prev, hash}
	}
	good := entry("good")
	goodHash := billing.EntryHash(head.Hash, 2, good)
	next := entry("next")
	otherCurrency := entry("eur")
	otherCurrency.Currency = "eur"
	for _, tc := range []struct {
		name string
		rows [][]any
	}{
		{"wrong hash", [][]any{row(good, 2, head.Hash, strings.Repeat("0", 64))}},
		{"wrong prev_hash", [][]any{row(good, 2, goodHash, billing.EntryHash(goodHash, 2, good))}},
		{"gap", [][]any{row(good, 3, head.Hash, billing.EntryHash(head.Hash, 3, good))}},
		{"seq taken", [][]any{row(good, 1, "", billing.EntryHash("", 1, good))}},
		{"second entry off the first", [][]any{row(good, 2, head.Hash, goodHash),
			row(next, 3, head.Hash, billing.EntryHash(head.Hash, 3, next))}},
		{"other currency", [][]any{row(otherCurrency, 2, head.Hash, billing.EntryHash(head.Hash, 2, otherCurrency))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := insert(tc.rows...); err == nil {
				t.Fatalf("booked; want the statement refused")
			}
			if n, err := billing.Entries(ctx, f.app, p, 0, 10); err != nil || len(n) != 1 {
				t.Errorf("ledger after the refused statement: %d entries, %v; want 1", len(n), err)
			}
		})
	}
	if err := insert(row(good, 2, head.Hash, goodHash), row(next, 3, goodHash, billing.EntryHash(goodHash, 3, next))); err != nil {
		t.Fatalf("correctly chained entries: %v", err)
	}
	if bal, err := billing.Balance(ctx, f.app, p); err != nil || bal != 980 {
		t.Errorf("balance %d, %v; want 980", bal, err)
	}
	mustVerify(t, f.app)
}
