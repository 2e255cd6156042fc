package controld_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

func TestTerminalSessions(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	a := activeAlloc(t, env, admin)
	b := activeAlloc(t, env, admin)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	bobc := env.Client(bobToken)
	gw := gatewayClient(t, env)

	shell, err := gateproto.SessionStart(ctx, gw, gateproto.SessionStartRequest{UserID: bob.ID, AllocationID: a.ID, Kind: api.SessionShell,
		Recording: "rec-1.cast", Gateway: "gw-1"})
	if err != nil {
		t.Fatal(err)
	}
	if shell.ID == "" || shell.UserID != bob.ID || shell.EndedAt != nil || shell.Gateway != "gw-1" {
		t.Fatalf("start got %+v", shell)
	}
	exec, err := gateproto.SessionStart(ctx, gw, gateproto.SessionStartRequest{UserID: bob.ID, AllocationID: b.ID, Kind: api.SessionExec, Command: "echo hi; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if exec.Gateway != "sshgate@service.gpuaas" {
		t.Errorf("gateway defaults to %q; want the gateway principal", exec.Gateway)
	}
	if _, err := gateproto.SessionStart(ctx, gw, gateproto.SessionStartRequest{UserID: env.Admin.ID, AllocationID: a.ID, Kind: api.SessionSFTP}); err != nil {
		t.Fatal(err)
	}
	three := 3
	ended, err := gateproto.SessionEnd(ctx, gw, gateproto.SessionEndRequest{ID: exec.ID, Bytes: 3, ExitStatus: &three})
	if err != nil {
		t.Fatal(err)
	}
	if ended.EndedAt == nil || ended.Bytes != 3 || ended.ExitStatus == nil || *ended.ExitStatus != 3 || ended.Command != "echo hi; exit 3" {
		t.Fatalf("end got %+v", ended)
	}
	again, err := gateproto.SessionEnd(ctx, gw, gateproto.SessionEndRequest{ID: exec.ID, Bytes: 99})
	if err != nil || again.Bytes != 3 || !again.EndedAt.Equal(*ended.EndedAt) {
		t.Errorf("ending twice got %+v, %v; want the first end unchanged", again, err)
	}

	tests := []struct {
		name  string
		c     *api.Client
		alloc string
		want  []string
	}{
		{"own sessions", bobc, "", []string{exec.ID, shell.ID}},
		{"own sessions of one allocation", bobc, a.ID, []string{shell.ID}},
		{"operators see all", admin, a.ID, nil}, // length checked below
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, err := tt.c.SessionList(ctx, api.SessionListRequest{AllocationID: tt.alloc})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range list.Sessions {
				got = append(got, s.ID)
			}
			if tt.want == nil {
				if len(got) != 2 {
					t.Errorf("got %d sessions; want 2", len(got))
				}
				return
			}
			if len(got) != len(tt.want) || got[0] != tt.want[0] || got[len(got)-1] != tt.want[len(tt.want)-1] {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
	if got, err := bobc.SessionGet(ctx, shell.ID); err != nil || got.Recording != "rec-1.cast" {
		t.Errorf("get own session got %+v, %v", got, err)
	}
	_, carolToken := env.AddUser(t, "carol@example.test", api.RoleUser)
	carol := env.Client(carolToken)
	if _, err := carol.SessionGet(ctx, shell.ID); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("another user's session got %v; want not found", err)
	}
	if list, err := carol.SessionList(ctx, api.SessionListRequest{}); err != nil || len(list.Sessions) != 0 {
		t.Errorf("carol's list got %+v, %v; want empty", list, err)
	}

	bad := []struct {
		name string
		c    *api.Client
		req  gateproto.SessionStartRequest
		want error
	}{
		{"unknown kind", gw, gateproto.SessionStartRequest{UserID: bob.ID, AllocationID: a.ID, Kind: "x11"}, api.ErrInvalidArgument},
		{"unknown allocation", gw, gateproto.SessionStartRequest{UserID: bob.ID, AllocationID: "a-000000000000", Kind: api.SessionShell}, api.ErrNotFound},
		{"no user", gw, gateproto.SessionStartRequest{AllocationID: a.ID, Kind: api.SessionShell}, api.ErrInvalidArgument},
		{"a user", bobc, gateproto.SessionStartRequest{UserID: bob.ID, AllocationID: a.ID, Kind: api.SessionShell}, api.ErrForbidden},
		{"an admin", admin, gateproto.SessionStartRequest{UserID: bob.ID, AllocationID: a.ID, Kind: api.SessionShell}, api.ErrForbidden},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := gateproto.SessionStart(ctx, tt.c, tt.req); !errors.Is(err, tt.want) {
				t.Errorf("got %v; want %v", err, tt.want)
			}
		})
	}
	if _, err := gateproto.SessionEnd(ctx, gw, gateproto.SessionEndRequest{ID: "ts-000000000000"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("ending an unknown session got %v; want not found", err)
	}
	if _, err := gateproto.SessionEnd(ctx, bobc, gateproto.SessionEndRequest{ID: shell.ID}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a user ending a session got %v; want forbidden", err)
	}
}

// TestGateLogin: a gateway logs in with its registered key (no long-lived
// token exists) and gets a short session of its service principal; an
// unregistered, revoked, operator or forged key, a stale assertion and a
// bad signature get nothing; only admins register keys.
func TestGateLogin(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	key, pub := newNkey(t)
	if _, err := admin.BusIdentityAdd(ctx, api.BusIdentityAddRequest{PublicKey: pub, Kind: api.BusIdentityGateway, Name: "sshgate"}); err != nil {
		t.Fatal(err)
	}
	login := func(key nkeys.KeyPair, at time.Time) (*api.LoginResponse, error) {
		pub, _ := key.PublicKey()
		req := gateproto.GateLoginRequest{PublicKey: pub, IssuedAt: at, Nonce: "0123456789abcdef"}
		req.Signature, _ = key.Sign(gateproto.GateLoginMessage(pub, at, req.Nonce))
		var out api.LoginResponse
		return &out, env.Client("").Mutate(ctx, gateproto.EndpointGateLogin, req, &out)
	}
	first, err := login(key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if first.User.Email != "sshgate@service.gpuaas" || first.User.Role != api.RoleGateway || first.User.Provider != api.ProviderService {
		t.Fatalf("got user %+v; want the gateway service principal", first.User)
	}
	if d := time.Until(first.ExpiresAt); d > controld.GatewaySessionTTL || d < controld.GatewaySessionTTL-time.Minute {
		t.Errorf("token valid for %s; want %s", d, controld.GatewaySessionTTL)
	}
	second, err := login(key, time.Now())
	if err != nil || second.User.ID != first.User.ID || second.Token == first.Token {
		t.Fatalf("second login got %+v, %v; want a new token for the same principal %s", second, err, first.User.ID)
	}
	gw := env.Client(first.Token)
	who, err := gw.Whoami(ctx)
	if err != nil || who.User.Role != api.RoleGateway {
		t.Fatalf("whoami as the gateway got %+v, %v", who, err)
	}
	_, line := newSSHKey(t)
	if _, err := gateproto.GateHostCert(ctx, gw, gateproto.GateHostCertRequest{PublicKey: line, Principals: []string{"localhost"}}); err != nil {
		t.Errorf("gate.host_cert as the gateway: %v", err)
	}
	// The real path: the gateway's own connection and GatewayLogin.
	if _, err := gateproto.GateHostCert(ctx, env.GatewayClient(t, "sshgate-2"), gateproto.GateHostCertRequest{PublicKey: line,
		Principals: []string{"localhost"}}); err != nil {
		t.Errorf("gate.host_cert through GatewayClient: %v", err)
	}
	// Login with any password fails: a service principal has none.
	if _, err := env.Client("").Login(ctx, api.LoginRequest{Email: "sshgate@service.gpuaas", Password: "whatever password"}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Errorf("login as the service principal got %v; want unauthenticated", err)
	}

	stranger, _ := newNkey(t)
	opKey, opPub := newNkey(t)
	if _, err := admin.BusIdentityAdd(ctx, api.BusIdentityAddRequest{PublicKey: opPub, Kind: api.BusIdentityOperator, Name: "ops-alice"}); err != nil {
		t.Fatal(err)
	}
	revokedKey, revokedPub := newNkey(t)
	if _, err := admin.BusIdentityAdd(ctx, api.BusIdentityAddRequest{PublicKey: revokedPub, Kind: api.BusIdentityGateway, Name: "old-gw"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.BusIdentityRevoke(ctx, api.BusIdentityRevokeRequest{PublicKey: revokedPub}); err != nil {
		t.Fatal(err)
	}
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	_, opToken := env.AddUser(t, "op@example.test", api.RoleOperator)
	_, newPub := newNkey(t)
	add := func(c *api.Client, req api.BusIdentityAddRequest) error {
		_, err := c.BusIdentityAdd(ctx, req)
		return err
	}
	gwReq := api.BusIdentityAddRequest{PublicKey: newPub, Kind: api.BusIdentityGateway, Name: "x"}
	refused := []struct {
		name string
		call func() error
		want error
	}{
		{"unregistered key", func() error { _, err := login(stranger, time.Now()); return err }, api.ErrUnauthenticated},
		{"operator key", func() error { _, err := login(opKey, time.Now()); return err }, api.ErrUnauthenticated},
		{"revoked key", func() error { _, err := login(revokedKey, time.Now()); return err }, api.ErrUnauthenticated},
		{"stale assertion", func() error { _, err := login(key, time.Now().Add(-2*time.Minute)); return err }, api.ErrUnauthenticated},
		{"assertion from the future", func() error { _, err := login(key, time.Now().Add(2*time.Minute)); return err }, api.ErrUnauthenticated},
		{"signed by another key", func() error {
			at := time.Now()
			req := gateproto.GateLoginRequest{PublicKey: pub, IssuedAt: at, Nonce: "0123456789abcdef"}
			req.Signature, _ = stranger.Sign(gateproto.GateLoginMessage(pub, at, req.Nonce))
			return env.Client("").Mutate(ctx, gateproto.EndpointGateLogin, req, nil)
		}, api.ErrUnauthenticated},
		{"gateway rotates a CA", func() error {
			_, err := gw.CARotate(ctx, api.CARotateRequest{CA: api.CAUser})
			return err
		}, api.ErrForbidden},
		{"gateway registers a key", func() error { return add(gw, gwReq) }, api.ErrForbidden},
		{"gateway lists nodes", func() error { _, err := gw.NodeList(ctx); return err }, api.ErrForbidden},
		{"operator registers a key", func() error { return add(env.Client(opToken), gwReq) }, api.ErrForbidden},
		{"user registers a key", func() error { return add(env.Client(bobToken), gwReq) }, api.ErrForbidden},
		{"unknown kind", func() error {
			return add(admin, api.BusIdentityAddRequest{PublicKey: newPub, Kind: "admin", Name: "x"})
		}, api.ErrInvalidArgument},
		{"not an nkey", func() error {
			return add(admin, api.BusIdentityAddRequest{PublicKey: "ssh-ed25519 AAAA", Kind: api.BusIdentityGateway, Name: "x"})
		}, api.ErrInvalidArgument},
		{"bad name", func() error {
			return add(admin, api.BusIdentityAddRequest{PublicKey: newPub, Kind: api.BusIdentityGateway, Name: "Ssh Gate"})
		}, api.ErrInvalidArgument},
		{"key registered twice", func() error {
			return add(admin, api.BusIdentityAddRequest{PublicKey: pub, Kind: api.BusIdentityGateway, Name: "again"})
		}, api.ErrConflict},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("got %v; want %v", err, tt.want)
			}
		})
	}
	var stored int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE endpoint = $1 AND response #>> '{}' LIKE '%token%'`,
		gateproto.EndpointGateLogin).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("%d stored responses hold a gateway token (%v); want none", stored, err)
	}
}

func newNkey(t *testing.T) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return kp, pub
}

// TestSessionsLeftRunningByACrashedGatewayAreInterrupted: a gateway that
// starts again ends, as interrupted, the sessions its crash left running
// (one with its recovered recording through session.end, the rest with
// session.interrupt); another gateway's sessions and ended ones are left
// as they are.
func TestSessionsLeftRunningByACrashedGatewayAreInterrupted(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	a := activeAlloc(t, env, admin)
	gw := gatewayClient(t, env)
	start := func(gateway string, kind string) api.TerminalSession {
		t.Helper()
		s, err := gateproto.SessionStart(ctx, gw, gateproto.SessionStartRequest{UserID: env.Admin.ID, AllocationID: a.ID, Kind: kind, Gateway: gateway})
		if err != nil {
			t.Fatal(err)
		}
		if s.State != api.SessionRunning {
			t.Fatalf("started session state %q; want %q", s.State, api.SessionRunning)
		}
		return *s
	}
	recorded, exec, ended := start("gw-1", api.SessionShell), start("gw-1", api.SessionExec), start("gw-1", api.SessionExec)
	other := start("gw-2", api.SessionShell)
	zero := 0
	if s, err := gateproto.SessionEnd(ctx, gw, gateproto.SessionEndRequest{ID: ended.ID, ExitStatus: &zero}); err != nil || s.State != api.SessionEnded {
		t.Fatalf("end got %+v, %v; want state %q", s, err, api.SessionEnded)
	}

	// The recording gw-1 found in its spool.
	s, err := gateproto.SessionEnd(ctx, gw, gateproto.SessionEndRequest{ID: recorded.ID, Bytes: 12, Recording: recorded.ID, Interrupted: true})
	if err != nil || s.State != api.SessionInterrupted || s.EndedAt == nil || s.Recording != recorded.ID || s.Bytes != 12 {
		t.Fatalf("end as interrupted got %+v, %v; want interrupted with its recording", s, err)
	}
	resp, err := gateproto.SessionInterrupt(ctx, gw, gateproto.SessionInterruptRequest{Gateway: "gw-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Sessions) != 1 || resp.Sessions[0].ID != exec.ID || resp.Sessions[0].State != api.SessionInterrupted ||
		resp.Sessions[0].EndedAt == nil {
		t.Fatalf("interrupt got %+v; want only %s, interrupted", resp.Sessions, exec.ID)
	}
	want := map[string]string{recorded.ID: api.SessionInterrupted, exec.ID: api.SessionInterrupted,
		ended.ID: api.SessionEnded, other.ID: api.SessionRunning}
	list, err := admin.SessionList(ctx, api.SessionListRequest{AllocationID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Sessions {
		if s.State != want[s.ID] || (s.State == api.SessionRunning) != (s.EndedAt == nil) {
			t.Errorf("session %s: state %q, ended %v; want %q", s.ID, s.State, s.EndedAt, want[s.ID])
		}
	}
	if len(list.Sessions) != len(want) {
		t.Errorf("got %d sessions; want %d", len(list.Sessions), len(want))
	}
	// Again: nothing left to interrupt, and an interrupted session does not
	// end a second time.
	if resp, err := gateproto.SessionInterrupt(ctx, gw, gateproto.SessionInterruptRequest{Gateway: "gw-1"}); err != nil || len(resp.Sessions) != 0 {
		t.Errorf("interrupt again got %+v, %v; want nothing", resp, err)
	}
	if s, err := gateproto.SessionEnd(ctx, gw, gateproto.SessionEndRequest{ID: exec.ID, Bytes: 5}); err != nil || s.State != api.SessionInterrupted || s.Bytes != 0 {
		t.Errorf("ending an interrupted session got %+v, %v; want it unchanged", s, err)
	}
	if _, err := gateproto.SessionInterrupt(ctx, gw, gateproto.SessionInterruptRequest{}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("interrupt without a gateway: got %v; want invalid_argument", err)
	}
	if _, err := gateproto.SessionInterrupt(ctx, admin, gateproto.SessionInterruptRequest{Gateway: "gw-2"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("interrupt by an admin: got %v; want forbidden", err)
	}
}
