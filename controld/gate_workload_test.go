package controld_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// TestGateAuthorizeWorkload: gate.authorize of a workload
// (ssh <workload-id>@gateway, docs/apps.md) is its allocation's, by the
// allocation's rules, with a ticket naming the workload: owner and member
// get one, a viewer is forbidden as for the allocation; a stranger, a
// malformed id and an unknown id get one and the same refusal (the
// message names the id asked, nothing else); a workload that is not
// running is refused naming its state; a request naming both or neither
// target is invalid. Every answer is audited against the workload.
func TestGateAuthorizeWorkload(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{Registry: testRegistry(t)})
	ctx := t.Context()
	admin := env.UserClient(t, env.Admin.ID, env.AdminToken)
	if _, err := admin.ImagePublish(ctx, api.ImagePublishRequest{Name: "tiny", Ref: pushTestImage(t, admin, "tiny"), Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, admin, "tiny"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"}); err != nil {
		t.Fatal(err)
	}
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	setAllocState(t, env, a.ID, api.AllocActive)
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE nodes SET terminal_addr = $2, terminal_host_key = $3 WHERE id = $1`,
		a.NodeID, terminalAddr, terminalHostKey); err != nil {
		t.Fatal(err)
	}
	w, err := admin.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	// No hostd here: the state its reports would reach is written.
	setWorkload := func(state string) {
		t.Helper()
		if _, err := env.Server.Pool().Exec(ctx, `UPDATE workloads SET state = $2 WHERE id = $1`, w.ID, state); err != nil {
			t.Fatal(err)
		}
	}
	setWorkload(api.WorkloadRunning)

	member, memberToken := env.AddUser(t, "member@example.test", api.RoleUser)
	viewer, viewerToken := env.AddUser(t, "viewer@example.test", api.RoleUser)
	stranger, strangerToken := env.AddUser(t, "stranger@example.test", api.RoleUser)
	certs := map[string]string{env.Admin.ID: userCert(t, admin), member.ID: userCert(t, env.Client(memberToken)),
		viewer.ID: userCert(t, env.Client(viewerToken)), stranger.ID: userCert(t, env.Client(strangerToken))}
	for _, m := range []struct{ email, role string }{{member.Email, api.ProjectMember}, {viewer.Email, api.ProjectViewer}} {
		if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: m.email, Role: m.role}); err != nil {
			t.Fatal(err)
		}
	}
	gw := gatewayClient(t, env)
	cas, err := gw.SSHCAs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	internal := trusted(t, cas.Internal)
	authorize := func(user, workloadID, allocID string) (*gateproto.GateAuthorizeResponse, error) {
		_, line := newSSHKey(t)
		return gateproto.GateAuthorize(ctx, gw, gateproto.GateAuthorizeRequest{WorkloadID: workloadID, AllocationID: allocID, UserID: user,
			TicketKey: line, Certificate: certs[user]})
	}

	for _, user := range []string{env.Admin.ID, member.ID} {
		resp, err := authorize(user, w.ID, "")
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		if resp.AllocationID != a.ID || resp.WorkloadID != w.ID || resp.NodeID != a.NodeID || resp.PosixUser != api.PosixUser(a.ID) {
			t.Errorf("%s: %+v; want allocation %s, workload %s", user, resp, a.ID, w.ID)
		}
		tk, err := sshcert.VerifyTicket(internal, parseCert(t, resp.Ticket), a.NodeID, time.Now())
		if err != nil || tk.Workload != w.ID || tk.Allocation != a.ID || tk.PosixUser != api.PosixUser(a.ID) {
			t.Errorf("%s: ticket %+v, %v; want one for workload %s on %s", user, tk, err, w.ID, a.ID)
		}
	}
	// The allocation's own ticket names no workload.
	if resp, err := authorize(member.ID, "", a.ID); err != nil || resp.WorkloadID != "" {
		t.Fatalf("the allocation: %+v, %v", resp, err)
	} else if tk, err := sshcert.VerifyTicket(internal, parseCert(t, resp.Ticket), a.NodeID, time.Now()); err != nil || tk.Workload != "" {
		t.Errorf("the allocation's ticket %+v, %v; want no workload", tk, err)
	}

	if _, err := authorize(viewer.ID, w.ID, ""); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("viewer: %v; want forbidden, as for the allocation", err)
	}
	refusal := func(user, id string) string {
		t.Helper()
		_, err := authorize(user, id, "")
		if !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("%s into %s: %v; want not found", user, id, err)
		}
		return strings.ReplaceAll(err.Error(), id, "ID")
	}
	stranger1 := refusal(stranger.ID, w.ID)
	for _, id := range []string{"w-000000000000", "w-NOT-AN-ID", "a-000000000000x", w.ID + "'; --"} {
		if got := refusal(env.Admin.ID, id); got != stranger1 {
			t.Errorf("unknown %q: %q; the stranger's: %q; want the same", id, got, stranger1)
		}
	}
	for _, req := range []gateproto.GateAuthorizeRequest{{UserID: member.ID}, {UserID: member.ID, AllocationID: a.ID, WorkloadID: w.ID}} {
		_, line := newSSHKey(t)
		req.TicketKey, req.Certificate = line, certs[member.ID]
		if _, err := gateproto.GateAuthorize(ctx, gw, req); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("%+v: %v; want invalid argument", req, err)
		}
	}

	for _, state := range []string{api.WorkloadStarting, api.WorkloadStopped, api.WorkloadFailed} {
		setWorkload(state)
		_, err := authorize(member.ID, w.ID, "")
		if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "is "+state+", not running") {
			t.Errorf("%s workload: %v; want a conflict naming the state", state, err)
		}
	}
	setWorkload(api.WorkloadRunning)
	setAllocState(t, env, a.ID, api.AllocReleasing)
	if _, err := authorize(member.ID, w.ID, ""); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "releasing, not active") {
		t.Errorf("a running workload of a releasing allocation: %v; want the allocation's refusal", err)
	}

	var granted, refused int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE action = 'gate.authorize'),
		count(*) FILTER (WHERE action = 'gate.authorize_refused') FROM audit_logs WHERE target_type = 'workload' AND target_id = $1`,
		w.ID).Scan(&granted, &refused); err != nil {
		t.Fatal(err)
	}
	if granted != 2 || refused != 6 {
		t.Errorf("audit rows of the workload: %d granted, %d refused; want 2 and 6", granted, refused)
	}
}
