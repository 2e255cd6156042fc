package agent_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// BenchmarkJobLogLatency measures a line printed by a job → the same
// line read by a follower of `gpuaas job logs -f` (job.logs with wait, as
// the CLI calls it, paced as it is), with a real controld and agent on one machine: the
// line's time is taken by hostd when the job wrote it, the follower's
// when its page arrives (one clock). The job prints a line every 50 ms,
// b.N lines; p50 and p99 in ms.
func BenchmarkJobLogLatency(b *testing.B) {
	_, admin, allocID := jobLogFleet(b, 0)
	ctx := context.Background()
	n := max(b.N, 10)
	j, err := admin.JobCreate(ctx, api.JobCreateRequest{AllocationID: allocID,
		Run: fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i"; sleep 0.05; i=$((i+1)); done`, n)})
	if err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	req := api.JobLogsRequest{ID: j.ID, Wait: api.JobLogsMaxWait}
	b.ResetTimer()
	for deadline := time.Now().Add(5 * time.Minute); len(took) < n && time.Now().Before(deadline); {
		p, err := admin.JobLogs(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		for _, l := range p.Lines {
			took = append(took, now.Sub(l.Time))
		}
		req.After, req.Cursor = p.After, p.Cursor
		if p.Ended {
			break
		}
		if len(p.Lines) > 0 {
			time.Sleep(api.JobLogsFollowPace) // as the CLI paces itself
		}
	}
	b.StopTimer()
	if len(took) < n {
		b.Fatalf("followed %d lines; want %d", len(took), n)
	}
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
}
