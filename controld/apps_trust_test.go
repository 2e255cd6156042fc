package controld_test

import (
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestWorkloadShowsItsImageRevoked: a workload whose image is revoked
// after it started keeps running, and app get and app ps say its image is
// revoked now.
func TestWorkloadShowsItsImageRevoked(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{Registry: testRegistry(t)})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	if _, err := admin.ImagePublish(ctx, api.ImagePublishRequest{Name: "tiny", Ref: pushTestImage(t, admin, "tiny"), Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, admin, "tiny"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"}); err != nil {
		t.Fatal(err)
	}
	// A bare-metal allocation made active by hand: no hostd provisions it here.
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE allocations SET state = 'active' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	w, err := admin.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := admin.AppGet(ctx, w.ID); err != nil || got.ImageTrust != api.TrustVerified {
		t.Fatalf("before the revoke: %+v, %v; want image_trust verified", got, err)
	}
	if _, err := admin.ImageRevoke(ctx, api.ImageChangeRequest{Image: "tiny", Reason: "CVE-1"}); err != nil {
		t.Fatal(err)
	}
	got, err := admin.AppGet(ctx, w.ID)
	if err != nil || got.ImageTrust != api.TrustRevoked || api.WorkloadFinal(got.State) {
		t.Fatalf("after the revoke: %+v, %v; want it still going, image_trust revoked", got, err)
	}
	ps, err := admin.AppPs(ctx, api.AppPsRequest{Project: controldtest.ProjectName})
	if err != nil || len(ps.Workloads) != 1 || ps.Workloads[0].ImageTrust != api.TrustRevoked {
		t.Fatalf("app ps after the revoke: %+v, %v", ps, err)
	}
}
