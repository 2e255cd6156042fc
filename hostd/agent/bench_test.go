package agent_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/sim"
	hostdtasks "github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// BenchmarkTaskRoundTrip times a no-op health probe from the moment
// controld queues it to the moment its result is applied in Postgres
// (dispatch, signature, hostd's seen-set write, the handler, the signed
// result, settle). Baseline: BenchmarkTaskEcho, a raw NATS request-reply
// on the same server.
func BenchmarkTaskRoundTrip(b *testing.B) {
	env, admin := benchFleet(b)
	host := newFakeHost()
	a := startAgentLogging(b, env, b.TempDir(), enroll(b, admin, "bench-node"), host.registry(), testutil.BenchLogger(b))
	readyNode(b, admin, a.NodeID())
	ctx := context.Background()
	pool := env.Server.Pool()
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		id, err := tasks.Enqueue(ctx, pool, tasks.Task{NodeID: a.NodeID(), Type: api.TaskHealthProbe}, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		for {
			var state string
			if err := pool.QueryRow(ctx, `SELECT state FROM node_tasks WHERE id = $1`, id).Scan(&state); err != nil {
				b.Fatal(err)
			}
			if state == hostproto.TaskSucceeded {
				break
			}
			time.Sleep(100 * time.Microsecond) // leave the CPU to controld and hostd
		}
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, durs)
	// Where the time goes, from controld's own timestamps.
	var toDispatch, toAccept, toFinish float64
	if err := pool.QueryRow(ctx, `SELECT
		avg(extract(epoch FROM dispatched_at - created_at)) * 1e6,
		avg(extract(epoch FROM accepted_at - dispatched_at)) * 1e6,
		avg(extract(epoch FROM finished_at - dispatched_at)) * 1e6
		FROM node_tasks WHERE type = $1 AND accepted_at IS NOT NULL`, api.TaskHealthProbe).Scan(&toDispatch, &toAccept, &toFinish); err == nil {
		b.ReportMetric(toDispatch, "queue→dispatch-µs")
		b.ReportMetric(toAccept, "dispatch→accepted-µs")
		b.ReportMetric(toFinish, "dispatch→settled-µs")
	}
}

// benchFleet is fleet for the task benchmarks: controld logs at the
// daemon's default level (testutil.BenchLogger), so that a task is
// measured with the lines production writes for it, not the tests' debug
// lines.
func benchFleet(b *testing.B) (*controldtest.Env, *api.Client) {
	b.Helper()
	env := controldtest.Start(b, controldtest.Options{NoNodes: true, Log: testutil.BenchLogger(b),
		Hosts: controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, AutoApproveSlots: true}})
	return env, env.UserClient(b, env.Admin.ID, env.AdminToken)
}

// BenchmarkTaskEcho is the transport baseline: a request-reply echo of a
// task-sized message through the same kind of embedded server.
func BenchmarkTaskEcho(b *testing.B) {
	nc := testutil.NATS(b).Connect(b)
	if _, err := nc.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 400) // about a signed health-probe envelope
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := nc.Request("bench.echo", payload, 5*time.Second); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, durs)
}

// BenchmarkAllocCreateWaitSim is `alloc create --wait` on a simulated
// slice host with the real task handlers: wall time from the create call
// until the allocation is active, and the share of it spent outside the
// host's phases (scheduling, dispatch, result application, polling).
func BenchmarkAllocCreateWaitSim(b *testing.B) {
	env, admin := fleet(b, controld.HostsConfig{})
	dir := b.TempDir()
	h, err := sim.NewHost(dir, sim.H200Slice8(), "bench-sim")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close() })
	tok := enroll(b, admin, "bench-sim")
	ag, err := agent.New(agent.Config{Server: env.NATSURL, StateDir: dir, Token: tok, Env: h.Env("", nil),
		Handlers: hostdtasks.New(hostdtasks.Config{PollInterval: 10 * time.Millisecond})})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	<-ag.Ready()
	readyNode(b, admin, ag.NodeID())
	var wall, inPhases time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
		if err != nil {
			b.Fatal(err)
		}
		var got *api.Allocation
		for {
			if got, err = admin.AllocGet(ctx, al.ID); err != nil {
				b.Fatal(err)
			}
			if got.State == api.AllocActive {
				break
			}
			if got.State == api.AllocFailed {
				b.Fatalf("provisioning failed: %s", got.Reason)
			}
			time.Sleep(5 * time.Millisecond)
		}
		wall += time.Since(start)
		for _, p := range got.Timeline {
			if p.Status == api.PhaseDone {
				inPhases += time.Duration(p.ElapsedMS) * time.Millisecond
			}
		}
		b.StopTimer()
		if _, err := admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: al.ID}); err != nil {
			b.Fatal(err)
		}
		waitAlloc(b, admin, al.ID, api.AllocReleased)
		b.StartTimer()
	}
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "wall-ms/op")
	b.ReportMetric(100*float64(wall-inPhases)/float64(wall), "%outside-phases")
}

func reportPercentiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	pct := func(p float64) float64 {
		return float64(durs[min(len(durs)-1, int(p*float64(len(durs))))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
