package billing_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/billing"
)

func TestAppendChainsEntriesAndKeepsBalance(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p1, p2 := f.project(t), f.project(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	amounts := map[string][]int64{p1: {10000, -250, -1, 5000}, p2: {700, -700, 3}}
	var got []billing.Entry
	for _, p := range []string{p1, p2} {
		for i, a := range amounts[p] {
			e, inserted := appendEntry(t, f.app, credit(p, a, at.Add(time.Duration(i)*time.Second)))
			if !inserted {
				t.Fatalf("first append of %+v: inserted=false", e)
			}
			got = append(got, e)
		}
	}
	for _, p := range []string{p1, p2} {
		var want int64
		for _, a := range amounts[p] {
			want += a
		}
		bal, err := billing.Balance(ctx, f.app, p)
		if err != nil {
			t.Fatal(err)
		}
		var cached int64
		if err := f.app.QueryRow(ctx, `SELECT balance_minor FROM billing_accounts WHERE project_id=$1`, p).Scan(&cached); err != nil {
			t.Fatal(err)
		}
		if bal != want || cached != want {
			t.Errorf("project %s: balance %d, cached %d; want %d", p, bal, cached, want)
		}
	}
	// Each account's chain starts empty and links entry to entry; the
	// database's hash is the Go EntryHash of the stored fields.
	prev := map[string]string{}
	seq := map[string]int64{}
	for _, e := range got {
		seq[e.ProjectID]++
		if e.PrevHash != prev[e.ProjectID] {
			t.Errorf("entry %d: prev_hash %q; want %q", e.ID, e.PrevHash, prev[e.ProjectID])
		}
		if want := billing.EntryHash(e.PrevHash, seq[e.ProjectID], e); e.Hash != want || len(e.Hash) != 64 {
			t.Errorf("entry %d: hash %q; want %q", e.ID, e.Hash, want)
		}
		if !e.CreatedAt.Equal(at.Truncate(time.Microsecond).Add(time.Duration(seq[e.ProjectID]-1) * time.Second)) {
			t.Errorf("entry %d: created_at %v", e.ID, e.CreatedAt)
		}
		prev[e.ProjectID] = e.Hash
	}
	checks := mustVerify(t, f.app)
	if len(checks) != 2 {
		t.Fatalf("verify checked %d accounts; want 2", len(checks))
	}
	for _, c := range checks {
		if c.Entries != int64(len(amounts[c.ProjectID])) || c.BalanceMinor != c.CachedBalanceMinor {
			t.Errorf("check %+v", c)
		}
	}
}

func TestAppendIsIdempotentPerKindAndReference(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	now := time.Now().UTC()
	first, inserted := appendEntry(t, f.app, billing.Entry{ProjectID: p, Kind: billing.KindTopup, Reference: "evt_1",
		AmountMinor: 2500, ActorID: "stripe", CreatedAt: now})
	if !inserted {
		t.Fatal("first append not inserted")
	}
	// The same booking again, even with other fields, returns the first.
	again, inserted := appendEntry(t, f.app, billing.Entry{ProjectID: p, Kind: billing.KindTopup, Reference: "evt_1",
		AmountMinor: 9999, ActorID: "stripe", CreatedAt: now.Add(time.Minute)})
	if inserted || again != first {
		t.Errorf("second append: inserted=%v entry %+v; want the first %+v", inserted, again, first)
	}
	// The same reference under another kind is another booking.
	if _, inserted := appendEntry(t, f.app, billing.Entry{ProjectID: p, Kind: billing.KindRefund, Reference: "evt_1",
		AmountMinor: -500, ActorID: "stripe", CreatedAt: now}); !inserted {
		t.Error("refund with a topup's reference was not booked")
	}
	if bal, err := billing.Balance(ctx, f.app, p); err != nil || bal != 2000 {
		t.Errorf("balance %d, %v; want 2000", bal, err)
	}
	mustVerify(t, f.app)
}

func TestAppendConcurrentDuplicatesBookOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	now := time.Now().UTC()
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	insertedCount := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				// Every worker books the same ten references, plus one of its own.
				for _, ref := range []string{fmt.Sprintf("shared-%d", i), fmt.Sprintf("own-%d-%d", w, i)} {
					err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
						_, ins, err := billing.Append(ctx, tx, billing.Entry{ProjectID: p, Kind: billing.KindAdjustment,
							Reference: ref, AmountMinor: 1, ActorID: "test", CreatedAt: now})
						if ins {
							mu.Lock()
							insertedCount++
							mu.Unlock()
						}
						return err
					})
					if err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if want := 10 + workers*10; insertedCount != want {
		t.Errorf("%d appends inserted; want %d", insertedCount, want)
	}
	if bal, err := billing.Balance(ctx, f.app, p); err != nil || bal != int64(10+workers*10) {
		t.Errorf("balance %d, %v; want %d", bal, err, 10+workers*10)
	}
	mustVerify(t, f.app)
}

func TestAppendRejectsInvalidEntries(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	now := time.Now()
	ok := billing.Entry{ProjectID: p, Kind: billing.KindAdjustment, Reference: "r", AmountMinor: 1, ActorID: "a", CreatedAt: now}
	for _, tc := range []struct {
		name   string
		change func(*billing.Entry)
	}{
		{"unknown kind", func(e *billing.Entry) { e.Kind = "gift" }},
		{"no project", func(e *billing.Entry) { e.ProjectID = "" }},
		{"no reference", func(e *billing.Entry) { e.Reference = "" }},
		{"no actor", func(e *billing.Entry) { e.ActorID = "" }},
		{"no time", func(e *billing.Entry) { e.CreatedAt = time.Time{} }},
		{"negative topup", func(e *billing.Entry) { e.Kind, e.AmountMinor = billing.KindTopup, -5 }},
		{"zero topup", func(e *billing.Entry) { e.Kind, e.AmountMinor = billing.KindTopup, 0 }},
		{"positive usage", func(e *billing.Entry) { e.Kind, e.AmountMinor = billing.KindUsage, 5 }},
		{"positive refund", func(e *billing.Entry) { e.Kind, e.AmountMinor = billing.KindRefund, 5 }},
		{"zero adjustment", func(e *billing.Entry) { e.AmountMinor = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ok
			tc.change(&e)
			err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
				_, _, err := billing.Append(ctx, tx, e)
				return err
			})
			if !errors.Is(err, billing.ErrInvalidEntry) {
				t.Errorf("got %v; want ErrInvalidEntry", err)
			}
		})
	}
	if bal, err := billing.Balance(ctx, f.app, p); err != nil || bal != 0 {
		t.Errorf("balance %d, %v after refused entries; want 0", bal, err)
	}
	// The database refuses what slips past the Go checks, too.
	_, err := f.app.Exec(ctx, `INSERT INTO ledger_entries (project_id, seq, kind, reference, amount_minor, actor_id,
		created_at, prev_hash, hash) VALUES ($1, 0, 'usage', 'direct', 10, 'a', now(), '', '')`, p)
	if pgCode(err) != "23514" {
		t.Errorf("positive usage inserted directly: %v; want check_violation", err)
	}
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestLedgerIsAppendOnly is acceptance 1: UPDATE, DELETE and TRUNCATE of
// the ledger fail for the application's role (no privilege) and for the
// owner (triggers), and nothing changes.
func TestLedgerIsAppendOnly(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	e, _ := appendEntry(t, f.app, credit(p, 1000, time.Now()))
	// A usage window, so that row triggers on usage_charges have a row to
	// fire for (an hour at 350/GPU-hour: 350 < 1000, nothing else booked).
	start := time.Now().Add(-2 * time.Hour).UTC()
	a := f.activeAllocation(t, p, "h200-slice", 1, start)
	var usage billing.AccrualResult
	err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) (err error) {
		usage, err = billing.Accrue(ctx, tx, start.Add(time.Hour), time.Now())
		return err
	})
	if err != nil || usage.Windows != 1 || usage.AmountMinor != 350 {
		t.Fatalf("accrue: %+v, %v; want one window of 350", usage, err)
	}
	var role, session string
	if err := f.app.QueryRow(ctx, `SELECT current_user, session_user`).Scan(&role, &session); err != nil {
		t.Fatal(err)
	}
	var super bool
	if err := f.owner.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		t.Fatal(err)
	}
	if role != "gpuaas_app" || session == role || !super {
		t.Fatalf("app acts as %q (session %q), owner superuser=%v: the test would prove nothing", role, session, super)
	}
	for _, who := range []struct {
		name string
		pool *pgxpool.Pool
		code string // privilege error from the grants, or the trigger's
		msg  string
	}{
		{"app role", f.app, "42501", "permission denied"},
		{"owner", f.owner, "42501", "append-only"},
	} {
		for _, table := range []string{"ledger_entries", "usage_charges"} {
			for _, stmt := range []string{
				`UPDATE ` + table + ` SET created_at = created_at`,
				`DELETE FROM ` + table,
				`TRUNCATE ` + table,
				`TRUNCATE ` + table + ` CASCADE`,
			} {
				t.Run(who.name+"/"+stmt, func(t *testing.T) {
					_, err := who.pool.Exec(ctx, stmt)
					if pgCode(err) != who.code || !strings.Contains(err.Error(), who.msg) {
						t.Errorf("got %v; want SQLSTATE %s mentioning %q", err, who.code, who.msg)
					}
				})
			}
		}
	}
	// The app role may not even touch the chain trigger.
	if _, err := f.app.Exec(ctx, `ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only`); pgCode(err) != "42501" {
		t.Errorf("app role disabling the trigger: %v; want permission denied", err)
	}
	after, err := billing.Entries(ctx, f.app, p, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || after[1] != e || after[0].AmountMinor != -350 {
		t.Errorf("ledger after the attempts: %+v; want the usage entry and %+v", after, e)
	}
	if u, _, err := billing.AllocationUsage(ctx, f.app, a); err != nil || u.AmountMinor != 350 || u.Seconds != 3600 {
		t.Errorf("usage after the attempts: %+v, %v; want 3600 s for 350", u, err)
	}
	mustVerify(t, f.owner)
}

// TestVerifyDetectsTampering breaks the ledger the only way left, as a
// superuser with the triggers switched off, and expects Verify to say so.
func TestVerifyDetectsTampering(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(ctx context.Context, tx pgx.Tx, p string) error
		want   string
	}{
		{"amount changed", func(ctx context.Context, tx pgx.Tx, p string) error {
			_, err := tx.Exec(ctx, `UPDATE ledger_entries SET amount_minor = amount_minor + 100000 WHERE project_id=$1 AND seq=2`, p)
			return err
		}, "does not match its contents"},
		{"entry deleted", func(ctx context.Context, tx pgx.Tx, p string) error {
			_, err := tx.Exec(ctx, `DELETE FROM ledger_entries WHERE project_id=$1 AND seq=2`, p)
			return err
		}, "sequence jumps"},
		{"row with a wrong hash", func(ctx context.Context, tx pgx.Tx, p string) error {
			_, err := tx.Exec(ctx, `INSERT INTO ledger_entries (project_id, seq, kind, reference, amount_minor, actor_id,
				created_at, prev_hash, hash) SELECT $1, 4, 'adjustment', 'forged', 50000, 'mallory', now(), hash, repeat('0', 64)
				FROM ledger_entries WHERE project_id=$1 AND seq=3`, p)
			return err
		}, "does not match its contents"},
		{"cached balance changed", func(ctx context.Context, tx pgx.Tx, p string) error {
			_, err := tx.Exec(ctx, `UPDATE billing_accounts SET balance_minor = balance_minor + 1 WHERE project_id=$1`, p)
			return err
		}, "cached balance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			p, other := f.project(t), f.project(t)
			for _, a := range []int64{1000, -300, -200} {
				appendEntry(t, f.app, credit(p, a, time.Now()))
				appendEntry(t, f.app, credit(other, a, time.Now()))
			}
			mustVerify(t, f.app)
			err := pgx.BeginFunc(ctx, f.owner, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
					return err
				}
				return tc.tamper(ctx, tx, p)
			})
			if err != nil {
				t.Fatal(err)
			}
			checks, err := billing.Verify(ctx, f.app)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range checks {
				switch {
				case c.ProjectID == other && !c.OK():
					t.Errorf("untouched account reported: %v", c.Problems)
				case c.ProjectID == p && !strings.Contains(strings.Join(c.Problems, "\n"), tc.want):
					t.Errorf("tampered account: problems %q; want one mentioning %q", c.Problems, tc.want)
				}
			}
		})
	}
}
