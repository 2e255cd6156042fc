package billing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// benchAllocationsPerProject is the size of each project of the fleet of
// one accrual window in the benchmark.
const benchAllocationsPerProject = 100

// BenchmarkAccrualWindow measures one accrual window over a fleet of
// active allocations (projects of 100) — usage windows and hash-chained
// ledger entries for every one of them — against the baseline of COPYing
// as many rows of the ledger's shape into a table without triggers or
// indexes, in the same run, for 100,000 and 1,000,000 allocations (the
// latter skipped under -short). The accrual sub-benchmark reports its
// time as a multiple of the COPY's (x-copy):
//
//	go test -run '^$' -bench AccrualWindow -benchtime 3x ./controld/billing/
func BenchmarkAccrualWindow(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("allocs=%d", n), func(b *testing.B) {
			if n > 100_000 && testing.Short() {
				b.Skip("1,000,000 allocations: not under -short")
			}
			benchAccrualWindow(b, n)
		})
	}
}

func benchAccrualWindow(b *testing.B, allocations int) {
	f := newFixture(b)
	ctx := context.Background()
	projects := allocations / benchAllocationsPerProject
	start := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO projects (id, name, created_by, created_at)
			SELECT 'bp' || g, 'bench-' || g, $1, now() FROM generate_series(1, ` + fmt.Sprint(projects) + `) g`, []any{f.userID}},
		{`INSERT INTO allocations (id, project_id, user_id, sku_id, shape, gpus, state, created_at, updated_at)
			SELECT 'ba' || g, 'bp' || (g % ` + fmt.Sprint(projects) + ` + 1), $1, 'h200-slice', 'gpu_slice', 1, 'active', $2, $2
			FROM generate_series(1, ` + fmt.Sprint(allocations) + `) g`, []any{f.userID, start}},
		{`INSERT INTO billing_meters (allocation_id, project_id, sku_id, gpus, price_per_gpu_hour_minor, currency, started_at)
			SELECT id, project_id, sku_id, gpus, 350, 'usd', $1 FROM allocations WHERE id LIKE 'ba%'`, []any{start}},
		{`CREATE TABLE bench_copy (LIKE ledger_entries INCLUDING DEFAULTS)`, nil},
		{`ANALYZE`, nil},
	} {
		if _, err := f.owner.Exec(ctx, q.sql, q.args...); err != nil {
			b.Fatalf("setup: %v", err)
		}
	}

	var copyPerOp float64 // seconds
	b.Run("copy-baseline", func(b *testing.B) {
		rows := make([][]any, allocations)
		for i := range rows {
			rows[i] = []any{fmt.Sprintf("bp%d", i%projects+1), int64(i + 1), "usage", fmt.Sprintf("ref-%d", i),
				int64(-5), "usd", "bench", billing.SystemActor, start, "", ""}
		}
		cols := []string{"project_id", "seq", "kind", "reference", "amount_minor", "currency", "memo", "actor_id",
			"created_at", "prev_hash", "hash"}
		for b.Loop() {
			n, err := f.owner.CopyFrom(ctx, pgx.Identifier{"bench_copy"}, cols, pgx.CopyFromRows(rows))
			if err != nil || n != int64(allocations) {
				b.Fatalf("copy: %d rows, %v", n, err)
			}
		}
		copyPerOp = b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(float64(allocations*b.N)/b.Elapsed().Seconds(), "rows/s")
	})

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
			if r.Windows != int64(allocations) || r.Entries != int64(allocations) {
				b.Fatalf("window %d charged %+v; want %d windows and entries", window, r, allocations)
			}
		}
		perOp := b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(float64(allocations)/perOp, "allocs/s")
		if copyPerOp > 0 {
			b.ReportMetric(perOp/copyPerOp, "x-copy")
		}
	})

	if checks := mustVerify(b, f.app); len(checks) != projects {
		b.Errorf("verified %d accounts; want %d", len(checks), projects)
	}
}
