package controld_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

const terminalAddr = "127.0.0.1:2222"

// activeAlloc creates an allocation as c and makes it active on a node
// that serves terminals. No hostd runs in these tests, so the states that
// provisioning would reach are written directly.
func activeAlloc(t *testing.T, env *controldtest.Env, c *api.Client) api.Allocation {
	t.Helper()
	ctx := t.Context()
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	setAllocState(t, env, a.ID, api.AllocActive)
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE nodes SET terminal_addr = $2, terminal_host_key = $3 WHERE id = $1`,
		a.NodeID, terminalAddr, terminalHostKey); err != nil {
		t.Fatal(err)
	}
	a.State = api.AllocActive
	return *a
}

// terminalHostKey stands for the key a node's terminal server reports.
const terminalHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ"

func setAllocState(t *testing.T, env *controldtest.Env, id, state string) {
	t.Helper()
	if _, err := env.Server.Pool().Exec(t.Context(), `UPDATE allocations SET state = $2, version = version + 1 WHERE id = $1`,
		id, state); err != nil {
		t.Fatal(err)
	}
}

func TestGateAuthorize(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	a := activeAlloc(t, env, admin)
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

	tests := []struct {
		name   string
		c      *api.Client
		user   string
		allocs string
		want   error
	}{
		{"owner", gw, env.Admin.ID, a.ID, nil},
		{"project member", gw, member.ID, a.ID, nil},
		{"viewer", gw, viewer.ID, a.ID, api.ErrForbidden},
		{"stranger", gw, stranger.ID, a.ID, api.ErrNotFound},
		{"unknown user", gw, "u-000000000000", a.ID, api.ErrForbidden}, // no certificate proves them
		{"unknown allocation", gw, env.Admin.ID, "a-000000000000", api.ErrNotFound},
		{"not the gateway", admin, env.Admin.ID, a.ID, api.ErrForbidden},
		{"not logged in", env.Client(""), env.Admin.ID, a.ID, api.ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, line := newSSHKey(t)
			presented, ok := certs[tt.user]
			if !ok {
				presented = certs[env.Admin.ID]
			}
			resp, err := gateproto.GateAuthorize(ctx, tt.c, gateproto.GateAuthorizeRequest{AllocationID: tt.allocs, UserID: tt.user, TicketKey: line,
				Certificate: presented})
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
			if err != nil {
				return
			}
			if resp.NodeID != a.NodeID || resp.TerminalAddr != terminalAddr || resp.TerminalHostKey != terminalHostKey || resp.PosixUser != api.PosixUser(a.ID) ||
				resp.Shape != a.Shape || resp.AllocationID != a.ID {
				t.Errorf("got %+v; want node %s at %s for %s", resp, a.NodeID, terminalAddr, a.ID)
			}
			cert := parseCert(t, resp.Ticket)
			if string(cert.Key.Marshal()) != string(key.Marshal()) {
				t.Error("the ticket is for another key")
			}
			tk, err := sshcert.VerifyTicket(internal, cert, a.NodeID, time.Now())
			if err != nil {
				t.Fatalf("verify ticket: %v", err)
			}
			if tk.Allocation != a.ID || tk.PosixUser != api.PosixUser(a.ID) || tk.Node != a.NodeID {
				t.Errorf("got ticket %+v; want %s as %s on %s", tk, a.ID, api.PosixUser(a.ID), a.NodeID)
			}
			if d := time.Until(tk.ValidBefore); d > time.Minute+time.Second {
				t.Errorf("ticket valid for %s more; want at most a minute", d)
			}
			if !tk.ValidBefore.Equal(resp.ValidBefore) {
				t.Errorf("response says valid before %s, ticket %s", resp.ValidBefore, tk.ValidBefore)
			}
			if _, err := sshcert.VerifyTicket(internal, cert, "n-other", time.Now()); !errors.Is(err, sshcert.ErrWrongNode) {
				t.Errorf("ticket on another node got %v; want wrong node", err)
			}
			if _, err := sshcert.VerifyUser(internal, cert, "", time.Now()); err == nil {
				t.Error("a ticket verified as a user certificate")
			}
		})
	}

	_, line := newSSHKey(t)
	if _, err := gateproto.GateAuthorize(ctx, gw, gateproto.GateAuthorizeRequest{AllocationID: a.ID, UserID: env.Admin.ID, TicketKey: "nope",
		Certificate: certs[env.Admin.ID]}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("bad ticket key got %v; want invalid argument", err)
	}
	if _, err := gateproto.GateAuthorize(ctx, gw, gateproto.GateAuthorizeRequest{AllocationID: a.ID, UserID: env.Admin.ID, TicketKey: line}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("no certificate got %v; want invalid argument", err)
	}
	setAllocState(t, env, a.ID, api.AllocReleased)
	if _, err := gateproto.GateAuthorize(ctx, gw, gateproto.GateAuthorizeRequest{AllocationID: a.ID, UserID: env.Admin.ID, TicketKey: line,
		Certificate: certs[env.Admin.ID]}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("released allocation got %v; want conflict", err)
	}

	var granted, refused int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE action = 'gate.authorize'),
		count(*) FILTER (WHERE action = 'gate.authorize_refused') FROM audit_logs WHERE target_id = $1`, a.ID).
		Scan(&granted, &refused); err != nil {
		t.Fatal(err)
	}
	if granted != 2 || refused != 4 {
		t.Errorf("audit has %d grants and %d refusals for the allocation; want 2 and 4", granted, refused)
	}
}

func TestGateAuthorizeNoTerminal(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	a := activeAlloc(t, env, env.Client(env.AdminToken))
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE nodes SET terminal_addr = '' WHERE id = $1`, a.NodeID); err != nil {
		t.Fatal(err)
	}
	_, line := newSSHKey(t)
	_, err := gateproto.GateAuthorize(ctx, gatewayClient(t, env), gateproto.GateAuthorizeRequest{AllocationID: a.ID, UserID: env.Admin.ID, TicketKey: line,
		Certificate: userCert(t, env.Client(env.AdminToken))})
	if !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("got %v; want unavailable", err)
	}
}

func TestGateHostCert(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	gw := gatewayClient(t, env)
	_, line := newSSHKey(t)
	resp, err := gateproto.GateHostCert(ctx, gw, gateproto.GateHostCertRequest{PublicKey: line, Principals: []string{"localhost", "gw.example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	cas, err := env.Client("").SSHCAs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCert(t, resp.Certificate)
	if err := sshcert.VerifyHost(trusted(t, cas.Host), "gw.example.test", cert, time.Now()); err != nil {
		t.Errorf("verify host certificate: %v", err)
	}
	if err := sshcert.VerifyHost(trusted(t, cas.Host), "elsewhere.example.test", cert, time.Now()); err == nil {
		t.Error("the host certificate verified for a name it does not carry")
	}
	if d := time.Until(resp.ValidBefore); d < 29*24*time.Hour || d > 30*24*time.Hour {
		t.Errorf("valid for %s; want 30 days", d)
	}
	if _, err := gateproto.GateHostCert(ctx, env.Client(env.AdminToken), gateproto.GateHostCertRequest{PublicKey: line, Principals: []string{"x"}}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("admin got %v; want forbidden", err)
	}
	if _, err := gateproto.GateHostCert(ctx, gw, gateproto.GateHostCertRequest{PublicKey: line}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("no principals got %v; want invalid argument", err)
	}
}
