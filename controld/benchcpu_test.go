package controld_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuMeter measures the CPU a benchmark's loop costs: this process's
// (client, embedded NATS server and controld: getrusage) and, when pool is
// set, that of the Postgres backends serving the benchmark's database (read
// from /proc, so Linux only; skipped elsewhere). Wall time on a shared
// machine moves with the load; CPU per op moves less, though under heavy
// load it moves too (bench/README.md, "alloc.get's CPU").
type cpuMeter struct {
	pool    *pgxpool.Pool
	self    time.Duration
	backend map[int]time.Duration
}

// startCPU starts measuring; call it right before b.ResetTimer.
func startCPU(b *testing.B, pool *pgxpool.Pool) *cpuMeter {
	b.Helper()
	m := &cpuMeter{pool: pool, self: selfCPU(b)}
	if pool != nil {
		m.backend = backendCPU(b, pool)
	}
	return m
}

// report adds cpu-µs/op (this process) and pg-cpu-µs/op (the Postgres
// backends) to the benchmark's line; call it right after the loop.
func (m *cpuMeter) report(b *testing.B) {
	b.Helper()
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(selfCPU(b)-m.self)/float64(time.Microsecond)/n, "cpu-µs/op")
	if m.pool == nil {
		return
	}
	var pg time.Duration
	for pid, t := range backendCPU(b, m.pool) {
		pg += t - m.backend[pid] // a backend started during the loop counts whole
	}
	b.ReportMetric(float64(pg)/float64(time.Microsecond)/n, "pg-cpu-µs/op")
}

func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's CPU times (100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// backendCPU returns the CPU time of each backend connected to the pool's
// database.
func backendCPU(b *testing.B, pool *pgxpool.Pool) map[int]time.Duration {
	b.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		b.Fatalf("backends: %v", err)
	}
	defer rows.Close()
	out := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatalf("backends: %v", err)
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			b.Skipf("Postgres CPU needs /proc: %v", err)
		}
		// Fields after the command's closing parenthesis: state is 3,
		// utime 14 and stime 15 (proc(5)).
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("parse /proc/%d/stat: %v %v", pid, err1, err2)
		}
		out[pid] = time.Duration(utime+stime) * clockTick
	}
	if err := rows.Err(); err != nil {
		b.Fatalf("backends: %v", err)
	}
	return out
}

// BenchmarkAllocGetTaskHistory is BenchmarkAllocGet with other
// allocations' finished tasks in node_tasks: the read's timeline query
// (tasks.QueueTimeline) filters node_tasks by allocation_id, which has no
// index, so its cost grows with the whole table's size rather than the
// allocation's own tasks (bench/README.md, "alloc.get's CPU").
func BenchmarkAllocGetTaskHistory(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			env, a := benchAllocation(b)
			pool := env.Server.Pool()
			ctx := context.Background()
			if _, err := pool.Exec(ctx, `INSERT INTO node_tasks (id, node_id, type, state, created_at, updated_at)
				SELECT 'tk-history-' || g, $1, 'release', 'succeeded', now(), now() FROM generate_series(1, $2::int) g`,
				a.NodeID, n); err != nil {
				b.Fatalf("insert tasks: %v", err)
			}
			if _, err := pool.Exec(ctx, `ANALYZE node_tasks`); err != nil {
				b.Fatal(err)
			}
			c := env.Client(env.AdminToken)
			b.ReportAllocs()
			cpu := startCPU(b, pool)
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.AllocGet(ctx, a.ID); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
}
