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

// A batch's chain (docs/decisions/0068-ledger-batch-chain.md): the writer
// of a batch chains its entries in one pass under its accounts' locks and
// COPYs them; ledger_entries_check checks the whole statement at once, and
// Verify checks the stored ledger. The tests below break a batch in ways
// that each leave exactly one of the three rules broken — every hash
// matches its own row, or the seqs are consecutive, or every prev_hash is
// the hash of the entry before — so that each fails if the rule it covers
// is removed from the check or from Verify.

// chainedRow is one entry of a batch with the chain fields it is stored
// with.
type chainedRow struct {
	e          billing.Entry
	seq        int64
	prev, hash string
}

func (r chainedRow) copyRow() []any {
	return []any{r.e.ProjectID, r.seq, string(r.e.Kind), r.e.Reference, r.e.AmountMinor, r.e.Currency, r.e.Memo,
		r.e.ActorID, r.e.CreatedAt, r.prev, r.hash}
}

// chainBatch chains n adjustments of project after head, as the accrual
// chains a batch (EntryHash, seq after seq).
func chainBatch(project string, head billing.Entry, headSeq int64, n int, at time.Time) []chainedRow {
	rows := make([]chainedRow, n)
	prev, seq := head.Hash, headSeq
	for i := range rows {
		e := credit(project, -int64(10+i), at)
		e.Currency = billing.DefaultCurrency
		seq++
		rows[i] = chainedRow{e: e, seq: seq, prev: prev, hash: billing.EntryHash(prev, seq, e)}
		prev = rows[i].hash
	}
	return rows
}

// rechain recomputes the links of rows from i on: each prev_hash the hash
// of the row before it (rows[i] keeps its own) and each hash its row's.
func rechain(rows []chainedRow, i int) {
	for k := i; k < len(rows); k++ {
		if k > i {
			rows[k].prev = rows[k-1].hash
		}
		rows[k].hash = billing.EntryHash(rows[k].prev, rows[k].seq, rows[k].e)
	}
}

// batchTampers are the ways to break a batch of 6 entries (seqs 2–7 after
// a head at seq 1) each covered by exactly one rule; want is what Verify
// says of the same break in the stored ledger.
var batchTampers = []struct {
	name   string
	tamper func(rows []chainedRow) []chainedRow
	want   string
}{
	// The fourth entry's amount changes after it was hashed: every seq and
	// every link still holds; only its hash no longer matches its row.
	{"tampered entry in the middle", func(rows []chainedRow) []chainedRow {
		rows[3].e.AmountMinor -= 100000
		return rows
	}, "does not match its contents"},
	// The fourth entry is taken out and the rest re-linked and re-hashed
	// over it: every hash and every link holds; only the seqs jump.
	{"deleted entry", func(rows []chainedRow) []chainedRow {
		rows = append(rows[:3], rows[4:]...)
		rows[3].prev = rows[2].hash
		rechain(rows, 3)
		return rows
	}, "sequence jumps"},
	// The third and fourth entries swap places, each re-hashed over its
	// new seq with its own prev_hash: seqs consecutive, every hash matches
	// its row; only the links no longer follow the order.
	{"reordered pair", func(rows []chainedRow) []chainedRow {
		rows[2].e, rows[3].e = rows[3].e, rows[2].e
		rows[2].prev, rows[3].prev = rows[3].prev, rows[2].prev
		rows[2].hash = billing.EntryHash(rows[2].prev, rows[2].seq, rows[2].e)
		rows[3].hash = billing.EntryHash(rows[3].prev, rows[3].seq, rows[3].e)
		return rows
	}, "does not match the previous entry's hash"},
}

// TestBatchCheckRefusesBrokenBatches: a batch COPYed with one of
// batchTampers' breaks fails its statement whole (nothing is booked); the
// same batch unbroken is booked.
func TestBatchCheckRefusesBrokenBatches(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	head, _ := appendEntry(t, f.app, credit(p, 100000, at))
	copyRows := func(rows []chainedRow) error {
		in := make([][]any, len(rows))
		for i, r := range rows {
			in[i] = r.copyRow()
		}
		_, err := f.app.CopyFrom(ctx, pgx.Identifier{"ledger_entries"}, ledgerCopyColumns, pgx.CopyFromRows(in))
		return err
	}
	for _, tc := range batchTampers {
		t.Run(tc.name, func(t *testing.T) {
			err := copyRows(tc.tamper(chainBatch(p, head, 1, 6, at)))
			if pgCode(err) != "23514" || !strings.Contains(err.Error(), "does not continue its account's hash chain") {
				t.Errorf("got %v; want the chain check's check_violation", err)
			}
			if n, err := billing.Entries(ctx, f.app, p, 0, 10); err != nil || len(n) != 1 {
				t.Errorf("ledger after the refused batch: %d entries, %v; want 1", len(n), err)
			}
		})
	}
	if err := copyRows(chainBatch(p, head, 1, 6, at)); err != nil {
		t.Fatalf("the batch unbroken: %v", err)
	}
	mustVerify(t, f.app)
}

// TestVerifyDetectsBrokenBatches applies batchTampers' breaks to a batch
// the accrual booked, as a superuser with the triggers off (the only way
// left), and expects Verify to name the rule broken, and only for that
// account.
func TestVerifyDetectsBrokenBatches(t *testing.T) {
	for _, tc := range batchTampers {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			p, other := f.project(t), f.project(t)
			start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			for _, project := range []string{p, other} {
				appendEntry(t, f.app, credit(project, 100000, start))
				for range 6 {
					f.activeAllocation(t, project, "h200-slice", 1, start)
				}
			}
			if r := accrue(t, f.app, start.Add(time.Hour)); r.Entries != 12 {
				t.Fatalf("accrual booked %d entries; want 12 (a batch of 6 per account)", r.Entries)
			}
			mustVerify(t, f.app)
			stored := storedBatch(t, f.owner, p)
			broken := tc.tamper(append([]chainedRow(nil), stored...))
			err := pgx.BeginFunc(ctx, f.owner, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `DELETE FROM ledger_entries WHERE project_id = $1 AND seq > 1`, p); err != nil {
					return err
				}
				for _, r := range broken {
					if _, err := tx.Exec(ctx, `INSERT INTO ledger_entries (project_id, seq, kind, reference, amount_minor,
						currency, memo, actor_id, created_at, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
						r.copyRow()...); err != nil {
						return err
					}
				}
				return nil
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

// storedBatch reads the entries of project after its first, in seq order.
func storedBatch(t *testing.T, pool *pgxpool.Pool, project string) []chainedRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT project_id, kind, reference, amount_minor, currency, memo,
		actor_id, created_at, seq, prev_hash, hash FROM ledger_entries WHERE project_id = $1 AND seq > 1 ORDER BY seq`, project)
	if err != nil {
		t.Fatal(err)
	}
	var out []chainedRow
	var r chainedRow
	_, err = pgx.ForEachRow(rows, []any{&r.e.ProjectID, &r.e.Kind, &r.e.Reference, &r.e.AmountMinor, &r.e.Currency,
		&r.e.Memo, &r.e.ActorID, &r.e.CreatedAt, &r.seq, &r.prev, &r.hash}, func() error {
		r.e.CreatedAt = r.e.CreatedAt.UTC()
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 6 {
		t.Fatalf("batch of %d entries; want 6", len(out))
	}
	return out
}

// TestConcurrentBatchesSerializeOnTheChainHead: two accruals of the same
// accounts (the second a later window) run at once. The second waits for
// the first's locks on the accounts — the chain heads — and then books
// its whole batch after the first's, one chain with no fork and no gap;
// without that wait it would find every meter locked, skip them all and
// book nothing.
func TestConcurrentBatchesSerializeOnTheChainHead(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	appendEntry(t, f.app, credit(p, 100000, start))
	for range 5 {
		f.activeAllocation(t, p, "h200-slice", 1, start)
	}
	first, err := f.app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	if r, err := billing.Accrue(ctx, first, start.Add(time.Hour), start.Add(time.Hour)); err != nil || r.Entries != 5 {
		t.Fatalf("first batch: %+v, %v; want 5 entries", r, err)
	}
	type result struct {
		r   billing.AccrualResult
		err error
	}
	second := make(chan result, 1)
	go func() {
		var res result
		res.err = pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) (err error) {
			res.r, err = billing.Accrue(ctx, tx, start.Add(2*time.Hour), start.Add(2*time.Hour))
			return err
		})
		second <- res
	}()
	waitForLockWaiter(t, f.owner)
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-second
	if res.err != nil || res.r.Entries != 5 || res.r.AmountMinor != 5*350 {
		t.Fatalf("second batch: %+v, %v; want 5 entries of an hour at 350", res.r, res.err)
	}
	var seqs string
	if err := f.app.QueryRow(ctx, `SELECT string_agg(seq::text, ',' ORDER BY seq) FROM ledger_entries WHERE project_id = $1`,
		p).Scan(&seqs); err != nil {
		t.Fatal(err)
	}
	if seqs != "1,2,3,4,5,6,7,8,9,10,11" {
		t.Errorf("seqs %s; want 1–11: the credit, then each batch whole", seqs)
	}
	mustVerify(t, f.app)
}

// TestForkedBatchesAreRefused: two writers chain a batch each from the same
// head (neither waited for the other: both read it before either wrote)
// and COPY them at once. The first commits; the second, chained off a head
// that is no longer the head, fails whole (the unique (project_id, seq)),
// so the chain cannot fork.
func TestForkedBatchesAreRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	head, _ := appendEntry(t, f.app, credit(p, 100000, at))
	batchA, batchB := chainBatch(p, head, 1, 4, at), chainBatch(p, head, 1, 4, at)
	copyIn := func(tx pgx.Tx, rows []chainedRow) error {
		in := make([][]any, len(rows))
		for i, r := range rows {
			in[i] = r.copyRow()
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"ledger_entries"}, ledgerCopyColumns, pgx.CopyFromRows(in))
		return err
	}
	first, err := f.app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	if err := copyIn(first, batchA); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	second := make(chan error, 1)
	go func() {
		second <- pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error { return copyIn(tx, batchB) })
	}()
	waitForLockWaiter(t, f.owner)
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-second; pgCode(err) != "23505" {
		t.Errorf("second batch off the same head: %v; want unique_violation", err)
	}
	entries, err := billing.Entries(ctx, f.app, p, 0, 10)
	if err != nil || len(entries) != 5 {
		t.Fatalf("ledger: %d entries, %v; want the credit and the first batch", len(entries), err)
	}
	for i, e := range entries[:4] {
		if want := batchA[3-i].e.Reference; e.Reference != want {
			t.Errorf("entry %d is %s; want %s of the first batch", 4-i, e.Reference, want)
		}
	}
	mustVerify(t, f.app)
}

// waitForLockWaiter polls until a session of the test database waits for
// a lock, or fails after a deadline.
func waitForLockWaiter(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session waits for a lock after 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
