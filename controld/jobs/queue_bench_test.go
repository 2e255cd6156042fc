package jobs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// BenchmarkQueuedJobStartAfterActivation measures how long a queued job
// waits, once its allocation is active (the provisioning result and its
// alloc.state event committed), for controld to start it: the outbox
// relay, one delivery to the jobs-queue consumer and Advance's
// transaction, seen by job.get polled back to back. p50/p99 reported.
func BenchmarkQueuedJobStartAfterActivation(b *testing.B) {
	e := startQueueEnv(b)
	ctx := context.Background()
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		first, queued, jobIDs := e.fillAndQueue(b, 1)
		if _, err := e.c.AllocRelease(ctx, api.AllocReleaseRequest{ID: first}); err != nil {
			b.Fatal(err)
		}
		e.freeAndPlace(b, first)
		testutil.Eventually(b, "placed", func() bool {
			a, err := e.c.AllocGet(ctx, queued[0])
			return err == nil && a.State == api.AllocProvisioning
		})
		b.StartTimer()
		start := time.Now()
		e.provisioned(b, queued[0])
		for {
			j, err := e.c.JobGet(ctx, jobIDs[0])
			if err != nil {
				b.Fatal(err)
			}
			if j.State == api.JobStarting {
				break
			}
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		if _, err := e.c.AllocRelease(ctx, api.AllocReleaseRequest{ID: queued[0]}); err != nil {
			b.Fatal(err)
		}
		e.freed(b, queued[0])
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}
