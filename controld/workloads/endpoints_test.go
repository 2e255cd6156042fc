package workloads_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
)

// endpoints are the workloads' endpoints over w's database, with the
// server's log bound logMax.
func (w *world) endpoints(logMax int64) endpointtest.Harness {
	clock := func() time.Time { return t0 }
	return endpointtest.Serve(w.pool, clock, workloads.Endpoints(workloads.Deps{DB: w.pool, Now: clock, Config: workloads.Config{LogMaxBytes: logMax}}))
}

func as(a alloc.Actor, header string) *endpoint.Request {
	return endpointtest.As(a.UserID, a.Role, header)
}

// TestRunEndpointBoundsTheLog: app.run starts the workload with the
// server's bound of its log (Deps.Config), as a job's.
func TestRunEndpointBoundsTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	h := w.endpoints(12345)
	wl, err := endpointtest.Mutate[api.Workload](ctx, h.Run, h.Find(t, api.EndpointAppRun), as(w.bob, ""),
		api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if n := w.count(t, `SELECT count(*) FROM workloads w JOIN node_tasks t ON t.id = w.task_id
		WHERE w.id = $1 AND (t.params->>'log_max_bytes')::bigint = 12345`, wl.ID); n != 1 {
		t.Errorf("workload.start tasks carrying the log bound: %d; want 1", n)
	}
	if n := w.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_id = $2`, api.EndpointAppRun, wl.ID); n != 1 {
		t.Errorf("audit rows of the run: %d; want 1", n)
	}
}

// TestPsAndGetEndpoints: app.ps with neither a project nor an allocation
// lists the header's project (so a caller outside it is refused), and
// app.ps and app.get tell the image's trust now, not the run's.
func TestPsAndGetEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	h := w.endpoints(0)
	wl, err := endpointtest.Mutate[api.Workload](ctx, h.Run, h.Find(t, api.EndpointAppRun), as(w.bob, ""),
		api.AppRunRequest{Image: "mine", AllocationID: w.allocID, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	ps := h.Find(t, api.EndpointAppPs)
	if _, err := endpointtest.Read[api.AppPsResponse](ctx, ps, as(w.alice, w.project), api.AppPsRequest{}); err == nil {
		t.Errorf("alice lists bob's project through the header: want refused")
	}
	if out, err := endpointtest.Read[api.AppPsResponse](ctx, ps, as(w.alice, ""), api.AppPsRequest{}); err != nil || len(out.Workloads) != 0 {
		t.Errorf("alice lists her own: %+v, %v; want none", out, err)
	}

	if _, err := images.Apply(ctx, w.pool, wl.ImageID, images.Move{Lifecycle: api.ImagePromoted, Trust: api.TrustRevoked}, "leaked", t0); err != nil {
		t.Fatal(err)
	}
	out, err := endpointtest.Read[api.AppPsResponse](ctx, ps, as(w.bob, w.project), api.AppPsRequest{})
	if err != nil || len(out.Workloads) != 1 || out.Workloads[0].ID != wl.ID || out.Workloads[0].ImageTrust != api.TrustRevoked {
		t.Fatalf("bob's ps: %+v, %v; want his workload, its image revoked", out, err)
	}
	got, err := endpointtest.Read[api.Workload](ctx, h.Find(t, api.EndpointAppGet), as(w.bob, ""), api.WorkloadRef{ID: wl.ID})
	if err != nil || got.ImageTrust != api.TrustRevoked {
		t.Fatalf("get: %+v, %v; want its image revoked", got, err)
	}
}
