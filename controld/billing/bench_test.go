package billing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// benchAllocations is the fleet of one accrual window in the benchmark.
const (
	benchAllocations = 100_000
	benchProjects    = 1_000
)

// BenchmarkAccrualWindow measures one accrual window over 100,000 active
// allocations (1,000 projects of 100) — one statement writing 100,000
// usage windows and 100,000 hash-chained ledger entries — against the
// baseline of COPYing 100,000 rows of the ledger's shape into a table
// without triggers, in the same run:
//
//	go test -run '^$' -bench AccrualWindow -benchtime 3x ./controld/billing/
func BenchmarkAccrualWindow(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	start := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO projects (id, name, created_by, created_at)
			SELECT 'bp' || g, 'bench-' || g, $1, now() FROM generate_series(1, ` + fmt.Sprint(benchProjects) + `) g`, []any{f.userID}},
		{`INSERT INTO allocations (id, project_id, user_id, sku_id, shape, gpus, state, created_at, updated_at)
			SELECT 'ba' || g, 'bp' || (g % ` + fmt.Sprint(benchProjects) + ` + 1), $1, 'h200-slice', 'gpu_slice', 1, 'active', $2, $2
			FROM generate_series(1, ` + fmt.Sprint(benchAllocations) + `) g`, []any{f.userID, start}},
		{`INSERT INTO billing_meters (allocation_id, project_id, sku_id, gpus, price_per_gpu_hour_minor, currency, started_at)
			SELECT id, project_id, sku_id, gpus, 350, 'usd', $1 FROM allocations WHERE id LIKE 'ba%'`, []any{start}},
		{`CREATE TABLE bench_copy (LIKE ledger_entries INCLUDING DEFAULTS)`, nil},
		{`ANALYZE`, nil},
	} {
		if _, err := f.owner.Exec(ctx, q.sql, q.args...); err != nil {
			b.Fatalf("setup: %v", err)
		}
	}

	b.Run("accrual", func(b *testing.B) {
		window := 0
		for b.Loop() {
			window++
			upTo := start.Add(time.Duration(window) * time.Minute)
			var r billing.AccrualResult
			err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) (err error) {
				r, err = billing.Accrue(ctx, tx, upTo, upTo)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			if r.Windows != benchAllocations || r.Entries != benchAllocations {
				b.Fatalf("window %d charged %+v; want %d windows and entries", window, r, benchAllocations)
			}
		}
		b.ReportMetric(float64(benchAllocations*b.N)/b.Elapsed().Seconds(), "allocs/s")
	})

	b.Run("copy-baseline", func(b *testing.B) {
		rows := make([][]any, benchAllocations)
		for i := range rows {
			rows[i] = []any{fmt.Sprintf("bp%d", i%benchProjects+1), int64(i + 1), "usage", fmt.Sprintf("ref-%d", i),
				int64(-5), "usd", "bench", billing.SystemActor, start, "", ""}
		}
		cols := []string{"project_id", "seq", "kind", "reference", "amount_minor", "currency", "memo", "actor_id",
			"created_at", "prev_hash", "hash"}
		for b.Loop() {
			n, err := f.owner.CopyFrom(ctx, pgx.Identifier{"bench_copy"}, cols, pgx.CopyFromRows(rows))
			if err != nil || n != benchAllocations {
				b.Fatalf("copy: %d rows, %v", n, err)
			}
		}
		b.ReportMetric(float64(benchAllocations*b.N)/b.Elapsed().Seconds(), "rows/s")
	})

	if checks := mustVerify(b, f.app); len(checks) != benchProjects {
		b.Errorf("verified %d accounts; want %d", len(checks), benchProjects)
	}
}
