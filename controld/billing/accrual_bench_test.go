package billing_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// The baselines of the accrual benchmarks: the same rows COPYed into
// tables with the indexes, checks and foreign key of the tables the
// accrual writes (the ledger's as it was before migration 0034, with its
// foreign key to projects; usage_charges's with its key to the meters),
// without the ledger's triggers.
const (
	benchIndexedCopyTable = `CREATE TABLE bench_copy_idx (LIKE ledger_entries INCLUDING ALL)`
	benchIndexedCopyFK    = `ALTER TABLE bench_copy_idx ADD FOREIGN KEY (project_id) REFERENCES projects (id)`
	benchUsageCopyTable   = `CREATE TABLE bench_usage_idx (LIKE usage_charges INCLUDING ALL)`
	benchUsageCopyFK      = `ALTER TABLE bench_usage_idx ADD FOREIGN KEY (allocation_id) REFERENCES billing_meters (allocation_id)`
	// The floor-copy sub-benchmark of BenchmarkAccrualWindow COPYs into
	// tables of its own, so that its rows never meet indexed-copy's.
	benchFloorLedgerTable = `CREATE TABLE bench_floor_ledger (LIKE ledger_entries INCLUDING ALL)`
	benchFloorLedgerFK    = `ALTER TABLE bench_floor_ledger ADD FOREIGN KEY (project_id) REFERENCES projects (id)`
	benchFloorUsageTable  = `CREATE TABLE bench_floor_usage (LIKE usage_charges INCLUDING ALL)`
	benchFloorUsageFK     = `ALTER TABLE bench_floor_usage ADD FOREIGN KEY (allocation_id) REFERENCES billing_meters (allocation_id)`
)

var (
	ledgerCopyColumns = []string{"project_id", "seq", "kind", "reference", "amount_minor", "currency", "memo", "actor_id",
		"created_at", "prev_hash", "hash"}
	usageCopyColumns = []string{"allocation_id", "project_id", "currency", "window_start", "window_end", "start_seconds",
		"end_seconds", "amount_minor", "created_at"}
)

// benchFleet makes the fleet of the accrual benchmarks: allocations
// active allocations with running meters, in projects of
// benchAllocationsPerProject, all started at start, and the baselines'
// tables.
func benchFleet(b *testing.B, allocations int) (f *fixture, projects int, start time.Time) {
	f = newFixture(b)
	ctx := context.Background()
	projects = allocations / benchAllocationsPerProject
	start = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
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
		{benchIndexedCopyTable, nil},
		{benchIndexedCopyFK, nil},
		{benchUsageCopyTable, nil},
		{benchUsageCopyFK, nil},
		{benchFloorLedgerTable, nil},
		{benchFloorLedgerFK, nil},
		{benchFloorUsageTable, nil},
		{benchFloorUsageFK, nil},
		{`ANALYZE`, nil},
	} {
		if _, err := f.owner.Exec(ctx, q.sql, q.args...); err != nil {
			b.Fatalf("setup: %v", err)
		}
	}
	return f, projects, start
}

// benchLedgerRows are the rows of round (from 0) of the indexed baseline:
// shaped as the accrual's entries (references, memos, 64-character
// hashes), with seqs and references no earlier round used.
func benchLedgerRows(allocations, projects, round int, start time.Time) [][]any {
	perProject := allocations / projects
	at := start.Add(time.Duration(round+1) * time.Minute)
	hash := strings.Repeat("ab", 32)
	rows := make([][]any, allocations)
	for i := range rows {
		rows[i] = []any{"bp" + strconv.Itoa(i%projects+1), int64(round*perProject + i/projects + 1), "usage",
			fmt.Sprintf("usage:ba%d:%s", i+1, at.Format("2006-01-02T15:04:05.000000Z")), int64(-5), "usd",
			fmt.Sprintf("ba%d: 60 s of usage (%d–%d s)", i+1, round*60, round*60+60), billing.SystemActor, at, hash, hash}
	}
	return rows
}

// benchUsageRows are the usage windows of round (from 0) for the indexed
// usage baseline, one per meter.
func benchUsageRows(allocations, round int, start time.Time) [][]any {
	from, to := start.Add(time.Duration(round)*time.Minute), start.Add(time.Duration(round+1)*time.Minute)
	rows := make([][]any, allocations)
	for i := range rows {
		rows[i] = []any{"ba" + strconv.Itoa(i+1), "bp" + strconv.Itoa((i+1)%(allocations/benchAllocationsPerProject)+1),
			"usd", from, to, int64(round * 60), int64(round*60 + 60), int64(5), to}
	}
	return rows
}

// benchCopy COPYs rows into table on a connection of its own as the
// owner and returns the database's CPU time for it.
func benchCopy(b *testing.B, f *fixture, table string, cols []string, rows [][]any) time.Duration {
	return onBackend(b, f.owner, func(ctx context.Context, conn *pgx.Conn) {
		n, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
		if err != nil || n != int64(len(rows)) {
			b.Fatalf("copy into %s: %d rows, %v", table, n, err)
		}
	})
}

// benchAccrue runs the accrual of window (from 1) as the application's
// role in a transaction and returns the database's CPU time for it.
func benchAccrue(b *testing.B, f *fixture, start time.Time, window, allocations int) time.Duration {
	return onBackend(b, f.app, func(ctx context.Context, conn *pgx.Conn) {
		upTo := start.Add(time.Duration(window) * time.Minute)
		var r billing.AccrualResult
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) (err error) {
			r, err = billing.Accrue(ctx, tx, upTo, upTo)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		if r.Windows != int64(allocations) || r.Entries != int64(allocations) {
			b.Fatalf("window %d charged %+v; want %d windows and entries", window, r, allocations)
		}
	})
}

// onBackend runs fn on a connection of pool and returns the CPU time
// (user and system) its server process spent meanwhile, read from
// /proc/<pid>/stat (the cluster runs on this machine); 0 if unreadable.
func onBackend(b *testing.B, pool *pgxpool.Pool, fn func(ctx context.Context, conn *pgx.Conn)) time.Duration {
	ctx := context.Background()
	c, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Release()
	pid := c.Conn().PgConn().PID()
	before := backendCPU(pid)
	fn(ctx, c.Conn())
	return backendCPU(pid) - before
}

// backendCPU is the CPU time process pid has used, 0 if unreadable.
func backendCPU(pid uint32) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (in parentheses, which may hold
	// spaces): state is field 3, utime and stime fields 14 and 15, in
	// clock ticks of 1/100 s (USER_HZ on Linux).
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// reportServerCPU reports the database's CPU time per op.
func reportServerCPU(b *testing.B, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "server-cpu-ms/op")
	}
}

// BenchmarkAccrualAlternated runs, in each round, a window of the
// accrual of 100,000 allocations and its baselines one after the other
// (COPY of as many ledger-shaped rows into a bare table; into a table
// with the ledger's indexes, checks and foreign key; and the floor: that
// plus COPYing the usage windows into a table with usage_charges's
// indexes and foreign key, the two writes the accrual cannot avoid), so
// that the machine's load moves all of them alike. It reports the
// medians over the rounds of each ratio, by the wall clock (x-…) and by
// the database's CPU time (cpu-x-…):
//
//	go test -run '^$' -bench AccrualAlternated -benchtime 5x ./controld/billing/
func BenchmarkAccrualAlternated(b *testing.B) {
	const allocations = 100_000
	f, projects, start := benchFleet(b, allocations)
	bare := benchBareRows(allocations, projects, start)
	var wall, cpu [4][]float64 // bare, indexed, floor, accrual
	round := 0
	timed := func(i int, fn func() time.Duration) {
		t0 := time.Now()
		c := fn()
		wall[i] = append(wall[i], time.Since(t0).Seconds())
		cpu[i] = append(cpu[i], c.Seconds())
	}
	for b.Loop() {
		b.StopTimer()
		ledger := benchLedgerRows(allocations, projects, round, start)
		usage := benchUsageRows(allocations, round, start)
		round++
		b.StartTimer()
		timed(0, func() time.Duration { return benchCopy(b, f, "bench_copy", ledgerCopyColumns, bare) })
		timed(1, func() time.Duration { return benchCopy(b, f, "bench_copy_idx", ledgerCopyColumns, ledger) })
		t0 := time.Now()
		c := benchCopy(b, f, "bench_usage_idx", usageCopyColumns, usage)
		wall[2] = append(wall[2], wall[1][len(wall[1])-1]+time.Since(t0).Seconds())
		cpu[2] = append(cpu[2], cpu[1][len(cpu[1])-1]+c.Seconds())
		timed(3, func() time.Duration { return benchAccrue(b, f, start, round, allocations) })
	}
	for i, name := range []string{"copy", "indexed-copy", "floor"} {
		b.ReportMetric(medianRatio(wall[3], wall[i]), "x-"+name)
		if cpu[i][0] > 0 {
			b.ReportMetric(medianRatio(cpu[3], cpu[i]), "cpu-x-"+name)
		}
	}
	b.ReportMetric(median(wall[3])*1000, "accrual-ms")
	b.ReportMetric(median(cpu[3])*1000, "accrual-cpu-ms")
	b.ReportMetric(median(wall[0])*1000, "copy-ms")
	b.ReportMetric(median(cpu[0])*1000, "copy-cpu-ms")
}

// medianRatio is the median over rounds of num[i]/den[i].
func medianRatio(num, den []float64) float64 {
	r := make([]float64, 0, len(num))
	for i := range num {
		if den[i] > 0 {
			r = append(r, num[i]/den[i])
		}
	}
	return median(r)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
