package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestReleaseAfterFailedProvisioningIsAccepted: a user's release just
// after the provisioning failed, while the platform's cleanup is queued,
// and again once it is done, is accepted and changes nothing: the
// allocation stays failed, the reply's note says the cleanup took care of
// it, and the cleanup runs once. It got conflict before.
func TestReleaseAfterFailedProvisioningIsAccepted(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	host := newFakeHost()
	host.failProvision = true
	host.blockRelease = make(chan struct{})
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-f"), host.registry())
	readyNode(t, admin, a.NodeID())
	ctx := context.Background()
	bob, token := env.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	user := env.UserClient(t, bob.ID, token)
	al, err := user.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, user, al.ID, api.AllocFailed)
	testutil.Eventually(t, "the cleanup to start", func() bool { return host.count(api.TaskVMRelease) == 1 })

	got, err := user.AllocRelease(ctx, api.AllocReleaseRequest{ID: al.ID})
	if err != nil {
		t.Fatalf("release while the cleanup runs: got %v; want accepted", err)
	}
	if got.State != api.AllocFailed || !strings.Contains(got.Note, "cleanup is already queued") {
		t.Errorf("reply: state %s, note %q; want failed and a note that the cleanup is queued", got.State, got.Note)
	}
	close(host.blockRelease)
	testutil.Eventually(t, "the cleanup to free the slots", func() bool {
		d, err := admin.NodeGet(ctx, a.NodeID())
		return err == nil && d.Node.SlotsFree == 8
	})
	got, err = user.AllocRelease(ctx, api.AllocReleaseRequest{ID: al.ID})
	if err != nil {
		t.Fatalf("release after the cleanup: got %v; want accepted", err)
	}
	if got.State != api.AllocFailed || !strings.Contains(got.Note, "nothing left to release") {
		t.Errorf("reply: state %s, note %q; want failed, nothing left to release", got.State, got.Note)
	}
	if n := host.count(api.TaskVMRelease); n != 1 {
		t.Errorf("cleanup ran %d times; want 1", n)
	}
	var open int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM node_tasks WHERE allocation_id = $1
		AND state NOT IN ('succeeded', 'failed', 'interrupted')`, al.ID).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Errorf("%d tasks of the allocation still open; want 0 (no second cleanup)", open)
	}
	final, err := user.AllocGet(ctx, al.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != api.AllocFailed {
		t.Errorf("state %s; want failed", final.State)
	}
}
