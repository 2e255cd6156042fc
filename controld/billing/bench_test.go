package billing_test

import (
	"fmt"
	"testing"
	"time"

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
// latter skipped under -short). A second baseline (indexed-copy) COPYs
// them into a table with the ledger's indexes, checks and the foreign key
// to projects it had until migration 0034. A third (floor-copy, at
// 100,000 allocations only) COPYs the two sets of rows an accrual window
// must write, its ledger entries and its usage windows, into tables with
// the indexes, checks and foreign keys of ledger_entries and usage_charges
// and no triggers: the cost of the writes themselves, whatever chains or
// checks them (docs/decisions/0068-ledger-batch-chain.md). The accrual
// sub-benchmark reports its time as a multiple of each (x-copy,
// x-indexed-copy, x-floor-copy) and the database's CPU time per window
// (server-cpu-ms, from the backend's /proc stat: less moved by the
// machine's load than the wall clock):
//
//	go test -run '^$' -bench AccrualWindow -benchtime 3x ./controld/billing/
//
// BenchmarkAccrualAlternated (accrual_bench_test.go) runs the same
// three alternately and reports medians.
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
	f, projects, start := benchFleet(b, allocations)

	var copyPerOp float64 // seconds
	b.Run("copy-baseline", func(b *testing.B) {
		rows := benchBareRows(allocations, projects, start)
		var cpu time.Duration
		for b.Loop() {
			cpu += benchCopy(b, f, "bench_copy", ledgerCopyColumns, rows)
		}
		copyPerOp = b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(float64(allocations*b.N)/b.Elapsed().Seconds(), "rows/s")
		reportServerCPU(b, cpu)
	})

	var indexedPerOp float64 // seconds
	b.Run("indexed-copy", func(b *testing.B) {
		var cpu time.Duration
		round := 0
		for b.Loop() {
			b.StopTimer()
			rows := benchLedgerRows(allocations, projects, round, start)
			round++
			b.StartTimer()
			cpu += benchCopy(b, f, "bench_copy_idx", ledgerCopyColumns, rows)
		}
		indexedPerOp = b.Elapsed().Seconds() / float64(b.N)
		reportServerCPU(b, cpu)
	})

	var floorPerOp float64 // seconds
	b.Run("floor-copy", func(b *testing.B) {
		if allocations > 100_000 {
			// The 1M window's goal is its own time; its floor would add
			// two indexed COPYs of 1M rows to every make bench.
			b.Skip("the floor is measured at 100,000 allocations")
		}
		var cpu time.Duration
		round := 0
		for b.Loop() {
			b.StopTimer()
			ledger := benchLedgerRows(allocations, projects, round, start)
			usage := benchUsageRows(allocations, round, start)
			round++
			b.StartTimer()
			cpu += benchCopy(b, f, "bench_floor_ledger", ledgerCopyColumns, ledger)
			cpu += benchCopy(b, f, "bench_floor_usage", usageCopyColumns, usage)
		}
		floorPerOp = b.Elapsed().Seconds() / float64(b.N)
		reportServerCPU(b, cpu)
	})

	b.Run("accrual", func(b *testing.B) {
		window := 0
		var cpu time.Duration
		for b.Loop() {
			window++
			cpu += benchAccrue(b, f, start, window, allocations)
		}
		perOp := b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(float64(allocations)/perOp, "allocs/s")
		if copyPerOp > 0 {
			b.ReportMetric(perOp/copyPerOp, "x-copy")
		}
		if indexedPerOp > 0 {
			b.ReportMetric(perOp/indexedPerOp, "x-indexed-copy")
		}
		if floorPerOp > 0 {
			b.ReportMetric(perOp/floorPerOp, "x-floor-copy")
		}
		reportServerCPU(b, cpu)
	})

	if checks := mustVerify(b, f.app); len(checks) != projects {
		b.Errorf("verified %d accounts; want %d", len(checks), projects)
	}
}

// benchBareRows are the rows of the bare COPY baseline: the ledger's
// columns, no hashes.
func benchBareRows(allocations, projects int, start time.Time) [][]any {
	rows := make([][]any, allocations)
	for i := range rows {
		rows[i] = []any{fmt.Sprintf("bp%d", i%projects+1), int64(i + 1), "usage", fmt.Sprintf("ref-%d", i),
			int64(-5), "usd", "bench", billing.SystemActor, start, "", ""}
	}
	return rows
}
