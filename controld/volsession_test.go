package controld_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// TestVolumeSession: gate.authorize with a volume id holds a ready volume
// for an sftp session of an owner or member (a ticket naming the volume),
// and while it does no allocation, second session or removal gets it;
// gate.volume_end lets it go. Strangers are told what an unknown id
// gets; a volume attached to an allocation, being made, or on a node that
// is down is refused with the reason and nothing is held. No allocation
// is made and nothing is billed for GPUs.
func TestVolumeSession(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	env.Credit(t, controldtest.ProjectName, 10_000_000)
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	p := controldtest.ProjectName
	v, err := admin.VolumeCreate(ctx, api.VolumeCreateRequest{Project: p, Name: "data", Size: "1G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	pool := env.Server.Pool()
	if _, err := pool.Exec(ctx, `UPDATE nodes SET terminal_addr = $2, terminal_host_key = $3 WHERE id = $1`,
		v.NodeID, terminalAddr, terminalHostKey); err != nil {
		t.Fatal(err)
	}
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
	open := func(user, vol string) (*gateproto.GateAuthorizeResponse, string, error) {
		_, line := newSSHKey(t)
		resp, err := gateproto.GateAuthorize(ctx, gw, gateproto.GateAuthorizeRequest{AllocationID: vol, UserID: user, TicketKey: line, Certificate: certs[user]})
		return resp, line, err
	}
	state := func() api.Volume {
		t.Helper()
		got, err := admin.VolumeGet(ctx, api.VolumeRef{Project: p, Volume: "data"})
		if err != nil {
			t.Fatal(err)
		}
		return *got
	}
	refused := func(name, user, vol string, want error, says string) {
		t.Helper()
		before := state()
		if _, _, err := open(user, vol); !errors.Is(err, want) || !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: got %v; want %v saying %q", name, err, want, says)
		}
		if after := state(); after.State != before.State || after.UpdatedAt != before.UpdatedAt {
			t.Fatalf("%s: the refusal changed the volume: %+v → %+v", name, before, after)
		}
	}
	refused("being made", env.Admin.ID, v.ID, api.ErrConflict, "creating")
	settleVolume(t, env, "data", api.TaskVolumeCreate, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: 1 << 30})

	allocs, usage := count(t, env, `SELECT count(*) FROM allocations`), count(t, env, `SELECT count(*) FROM ledger_entries WHERE kind <> 'storage'`)
	refused("viewer", viewer.ID, v.ID, api.ErrForbidden, "viewer")
	refused("stranger", stranger.ID, v.ID, api.ErrNotFound, "no volume "+v.ID)
	refused("unknown", env.Admin.ID, "vol-000000000000", api.ErrNotFound, "no volume vol-000000000000")

	resp, key, err := open(member.ID, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := sshcert.VerifyTicket(internal, parseCert(t, resp.Ticket), v.NodeID, time.Now())
	if err != nil || tk.Allocation != v.ID || tk.PosixUser != api.PosixUser(v.ID) || resp.TerminalAddr != terminalAddr {
		t.Fatalf("ticket %+v, %v (answer %+v); want one for volume %s on %s", tk, err, resp, v.ID, v.NodeID)
	}
	if got := state(); got.State != api.VolumeAttached || got.Session == nil || got.Session.UserID != member.ID {
		t.Fatalf("volume during the session: %+v; want attached to %s's session", got, member.ID)
	}
	if _, err := gateproto.GateAuthorize(ctx, gw, gateproto.GateAuthorizeRequest{AllocationID: v.ID, UserID: member.ID, TicketKey: key,
		Certificate: certs[member.ID]}); err != nil {
		t.Fatalf("the same request again (a retry): %v; want the same session", err)
	}
	refused("a second session", env.Admin.ID, v.ID, api.ErrConflict, "open in an sftp session of "+member.ID)
	metal := api.AllocCreateRequest{Project: p, SKU: "h100-baremetal", GPUs: 8, Volumes: []api.VolumeMount{{Volume: "data"}}}
	if _, err := admin.AllocCreate(ctx, metal); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "sftp session") {
		t.Fatalf("alloc create during the session: %v; want conflict naming the session", err)
	}
	if _, err := admin.VolumeRemove(ctx, api.VolumeRef{Project: p, Volume: "data"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("rm during the session: %v; want conflict", err)
	}
	if got := count(t, env, `SELECT count(*) FROM allocations`); got != allocs {
		t.Fatalf("%d allocations after the session opened; want %d (none made)", got, allocs)
	}

	_, otherKey := newSSHKey(t)
	if r, err := gateproto.GateVolumeEnd(ctx, gw, gateproto.GateVolumeEndRequest{VolumeID: v.ID, TicketKey: otherKey}); err != nil || r.Released {
		t.Fatalf("end with another session's key: %+v, %v; want nothing released", r, err)
	}
	if r, err := gateproto.GateVolumeEnd(ctx, gw, gateproto.GateVolumeEndRequest{VolumeID: v.ID, TicketKey: key}); err != nil || !r.Released {
		t.Fatalf("end: %+v, %v; want released", r, err)
	}
	if got := state(); got.State != api.VolumeReady || got.Session != nil {
		t.Fatalf("volume after the session: %+v; want ready", got)
	}
	for _, action := range []string{"volume.session_start", "volume.session_end", "volume.session_start_refused"} {
		if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_id = $2`, action, v.ID); n == 0 {
			t.Errorf("no %s audit row", action)
		}
	}
	if got := count(t, env, `SELECT count(*) FROM ledger_entries WHERE kind <> 'storage'`); got != usage {
		t.Errorf("%d non-storage ledger entries after the session; want %d (nothing billed)", got, usage)
	}

	// Attached to an allocation: refused, naming it.
	a, err := admin.AllocCreate(ctx, metal)
	if err != nil {
		t.Fatal(err)
	}
	refused("attached", env.Admin.ID, v.ID, api.ErrConflict, "attached to allocation "+a.ID)
	if _, err := admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	settleRelease(t, env, a.ID)

	// The node down: refused, and nothing held.
	if _, err := pool.Exec(ctx, `UPDATE nodes SET state = 'down' WHERE id = $1`, v.NodeID); err != nil {
		t.Fatal(err)
	}
	refused("node down", env.Admin.ID, v.ID, api.ErrUnavailable, "is down")
	if _, err := pool.Exec(ctx, `UPDATE nodes SET state = 'ready' WHERE id = $1`, v.NodeID); err != nil {
		t.Fatal(err)
	}

	// A hold whose gateway never ended it lasts its lease, then an
	// allocation (or another session) takes the volume.
	if _, _, err := open(env.Admin.ID, v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE volumes SET session_at = session_at - $2::interval WHERE id = $1`,
		v.ID, (api.VolumeSessionMax + time.Hour).String()); err != nil {
		t.Fatal(err)
	}
	a, err = admin.AllocCreate(ctx, metal)
	if err != nil {
		t.Fatalf("alloc create over a hold past its lease: %v", err)
	}
	if got := state(); got.AllocationID != a.ID || got.Session != nil {
		t.Fatalf("volume after the takeover: %+v; want attached to %s alone", got, a.ID)
	}
}
