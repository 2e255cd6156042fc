package controld_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// BenchmarkAllocGetFloor is the floor of BenchmarkAllocGet: what any
// alloc.get costs in its dependencies, with nothing of controld's API
// layer. The same request and reply travel on the same kind of connection
// as BenchmarkNATSEcho's; the responder decodes the request, reads the
// allocation with the endpoint's own batch (alloc.GetWithTimeline and the
// three reads the endpoint adds, on controld's pool, as the admin) and
// encodes it; the client decodes the reply as api.Client does. What it
// leaves out: the token and project check, the rate limit, the request's
// log line, the error catalog and the endpoint framework.
func BenchmarkAllocGetFloor(b *testing.B) {
	env, a := benchAllocation(b)
	pool := env.Server.Pool()
	actor := alloc.Actor{UserID: env.Admin.ID, Role: env.Admin.Role}
	ctx := context.Background()
	sub, err := env.NC.Subscribe("bench.floor", func(m *nats.Msg) {
		var ref api.AllocRef
		if err := json.Unmarshal(m.Data, &ref); err != nil {
			b.Error(err)
			return
		}
		var policy *api.AllocPolicy
		var notices []api.AllocNotice
		var vols []api.AllocVolume
		got, err := alloc.GetWithTimeline(ctx, pool, actor, ref.ID, func(b *pgx.Batch) {
			idle.QueuePolicy(b, &policy, ref.ID)
			outbox.QueueNotices(b, &notices, ref.ID)
			volumes.QueueOfAllocation(b, &vols, ref.ID)
		})
		if err != nil {
			b.Error(err)
			return
		}
		got.Policy, got.Notices, got.Volumes = policy, notices, vols
		reply, err := json.Marshal(&got)
		if err != nil {
			b.Error(err)
			return
		}
		_ = m.Respond(reply)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	body, err := json.Marshal(api.AllocRef{ID: a.ID})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := startCPU(b, pool)
	b.ResetTimer()
	for b.Loop() {
		msg := nats.NewMsg("bench.floor")
		msg.Data = body
		msg.Header.Set(api.HeaderAuthorization, "Bearer "+env.AdminToken)
		msg.Header.Set(api.HeaderProject, env.Project.Name)
		ctx, cancel := context.WithTimeout(ctx, api.DefaultTimeout)
		r, err := env.NC.RequestMsgWithContext(ctx, msg)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		var got api.Allocation
		if err := json.Unmarshal(r.Data, &got); err != nil || got.ID != a.ID {
			b.Fatalf("floor read: %v, %q", err, got.ID)
		}
	}
	cpu.report(b)
}
