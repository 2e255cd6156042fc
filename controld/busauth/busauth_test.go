package busauth_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/recstore"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestNoCredentials: a connection that presents nothing, or only what
// gpuaas never issues, is refused: `nats sub '>'` sees nothing.
func TestNoCredentials(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	refused := []struct {
		name string
		opts []nats.Option
	}{
		{"nothing", nil},
		{"user and password", []nats.Option{nats.UserInfo("admin", "admin")}},
		{"garbage token", []nats.Option{nats.Token("not-a-token")}},
		{"a token signed by someone else", []nats.Option{nats.Token(
			"eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJncHVhYXMtY29udHJvbGQiLCJzdWIiOiJ1LTEiLCJqdGkiOiJzLTEifQ.c2ln")}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dial(t, env.NATSURL, tt.opts...)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("got %v; want an authorization violation", err)
			}
		})
	}
}

// TestForgedNonceSignature: a connection claiming a key it cannot sign
// with (a raw CONNECT with a made-up signature) is refused, so no one can
// take a node's or a gateway's identity by naming its public key.
func TestForgedNonceSignature(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	_, gwPub := newKey(t)
	u, err := url.Parse(env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	info, err := r.ReadString('\n')
	if err != nil || !strings.Contains(info, `"nonce"`) {
		t.Fatalf("got INFO %q, %v; want a nonce to sign", info, err)
	}
	connect, _ := json.Marshal(map[string]any{"nkey": gwPub, "sig": "bm90IGEgc2lnbmF0dXJl", "verbose": false,
		"pedantic": false, "protocol": 1})
	if _, err := conn.Write([]byte("CONNECT " + string(connect) + "\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil || !strings.Contains(strings.ToLower(line), "authorization violation") {
		t.Fatalf("got %q, %v; want -ERR 'Authorization Violation'", line, err)
	}
}

// TestUserPermissions: with user A's token a connection may call the API
// and read A's own replies and events, and nothing else: not the API's
// subjects, not B's inbox or events, not the hosts; it cannot publish
// events, nor anything but API requests. A forged event never reaches B
// nor the EVENTS stream.
func TestUserPermissions(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	alice, aliceToken := env.AddUser(t, "alice@example.test", api.RoleUser)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	a := mustDial(t, env.NATSURL, userOpts(alice.ID, aliceToken)...)

	// What A may do.
	ac := api.NewClient(a.nc, api.WithToken(aliceToken))
	if who, err := ac.Whoami(ctx); err != nil || who.User.ID != alice.ID {
		t.Fatalf("whoami on A's own connection got %+v, %v", who, err)
	}
	if _, err := ac.SubscribeEvents(ctx, alice.ID); err != nil {
		t.Fatalf("subscribe to A's own events: %v", err)
	}

	for _, subj := range []string{">", "gpuaas.>", api.SubjectPrefix + ".>", api.SubjectPrefix + ".auth.login",
		api.UserInboxPrefix(bob.ID) + ".>", "gpuaas.user." + bob.ID + ".>", "gpuaas.user.*.evt.>", "gpuaas.host.>",
		"gpuaas.ctl.>", "gpuaas.evt.>", "gpuaas.gate.>", gateproto.GateNoticeSubject, "$JS.API.>", "$O.>", "_INBOX.>", "$SYS.REQ.USER.AUTH"} {
		a.refusedSub(t, subj, "")
	}
	a.refusedSub(t, api.SubjectPrefix+".>", "q") // cannot answer the API in any queue group
	a.refusedSub(t, api.SubjectPrefix+".auth.login", "q")
	for _, subj := range []string{"gpuaas.evt.alloc.state", "gpuaas.user." + bob.ID + ".evt.alloc.state",
		"gpuaas.user." + alice.ID + ".evt.alloc.state", "gpuaas.host.n-1.task", "gpuaas.ctl.host.n-1.heartbeat",
		"gpuaas.ctl.enroll", gateproto.GateRevokedSubject, gateproto.GateNoticeSubject, "$JS.API.STREAM.INFO.EVENTS", "$SYS.REQ.USER.AUTH"} {
		a.refusedPub(t, subj, []byte(`{"kind":"alloc.state","data":{"forged":true}}`))
	}

	// B, watching, sees a real event of theirs first: the forged ones
	// above never arrived. The real one is a project B creates.
	b := mustDial(t, env.NATSURL, userOpts(bob.ID, bobToken)...)
	bc := api.NewClient(b.nc, api.WithToken(bobToken))
	events, err := bc.SubscribeEvents(ctx, bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	a.refusedPub(t, "gpuaas.user."+bob.ID+".evt.alloc.state", []byte(`{"id":1,"kind":"alloc.state","data":{"forged":true}}`))
	if _, err := bc.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "bobs"}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if strings.Contains(string(ev.Data), "forged") || ev.Kind != api.EventProject {
			t.Fatalf("B's first event is %+v; want the project B created", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B saw no event")
	}
	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, api.EventStreamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range info.NumPending {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(m.Data()), "forged") {
			t.Fatalf("the EVENTS stream holds a forged event: %s", m.Data())
		}
	}
}

// TestSniffersSeeNothing: connections holding every kind of credential
// but controld's watch what they may while a user logs in with a
// password, calls the API with a bearer token, and a node gets a task:
// none of them sees the password, the token, a reply meant for someone
// else or a task envelope.
func TestSniffersSeeNothing(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	const password = "another good password" // controldtest.AddUser's
	carol, carolToken := env.AddUser(t, "carol@example.test", api.RoleUser)
	mallory, malloryToken := env.AddUser(t, "mallory@example.test", api.RoleUser)
	nodeID, nodeKey := enrolledNode(t, env, "sniffer-node")
	otherNode, otherKey := enrolledNode(t, env, "victim-node")
	anonKey, anonPub := newKey(t)
	gwKey, gwPub := newKey(t)
	if _, err := env.Client(env.AdminToken).BusIdentityAdd(ctx, api.BusIdentityAddRequest{PublicKey: gwPub,
		Kind: api.BusIdentityGateway, Name: "sniffer-gw"}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex // protects seen
	var seen []string
	watch := func(p *probe, subjects ...string) {
		for _, s := range subjects {
			if _, err := p.nc.Subscribe(s, func(m *nats.Msg) {
				mu.Lock()
				seen = append(seen, m.Subject+" "+string(m.Data))
				mu.Unlock()
			}); err != nil {
				t.Fatal(err)
			}
		}
		_ = p.nc.Flush()
	}
	user := mustDial(t, env.NATSURL, userOpts(mallory.ID, malloryToken)...)
	watch(user, api.UserInboxPrefix(mallory.ID)+".>", "gpuaas.user."+mallory.ID+".>")
	anon := mustDial(t, env.NATSURL, keyOpts(t, anonKey)...)
	watch(anon, api.InboxPrefix(anonPub)+".>")
	node := mustDial(t, env.NATSURL, nodeOpts(nodeID, nodeKey)...)
	watch(node, "gpuaas.host."+nodeID+".>", api.InboxPrefix(nodeID)+".>")
	gateway := mustDial(t, env.NATSURL, keyOpts(t, gwKey)...)
	watch(gateway, api.InboxPrefix(gwPub)+".>", "gpuaas.gate.>", "gpuaas.user.*.>")
	// Each also tries to widen its view, and is refused.
	anon.refusedSub(t, "_INBOX.*.>", "")
	node.refusedSub(t, "gpuaas.host."+otherNode+".>", "")
	node.refusedSub(t, "gpuaas.host.*.task", "")

	// The victim logs in with a password on a connection of its own and
	// uses the token; the victim node gets a task delivered.
	victimKey, _ := newKey(t)
	victim := mustDial(t, env.NATSURL, keyOpts(t, victimKey)...)
	login, err := keyClient(t, victim, victimKey).Login(ctx, api.LoginRequest{Email: "carol@example.test", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	vc := mustDial(t, env.NATSURL, userOpts(carol.ID, login.Token)...)
	if _, err := api.NewClient(vc.nc, api.WithToken(carolToken)).ProjectCreate(ctx, api.ProjectCreateRequest{Name: "carols"}); err != nil {
		t.Fatal(err)
	}
	victimNode := mustDial(t, env.NATSURL, nodeOpts(otherNode, otherKey)...)
	tasks := make(chan *nats.Msg, 4)
	if _, err := victimNode.nc.ChanSubscribe("gpuaas.host."+otherNode+".>", tasks); err != nil {
		t.Fatal(err)
	}
	_ = victimNode.nc.Flush()
	// Enrollment queued a health probe and a discovery for the node; the
	// dispatcher delivers them once the node is reachable.
	select {
	case <-tasks:
	case <-time.After(20 * time.Second):
		t.Fatal("the victim node got no task")
	}
	// Let anything stray arrive, then look.
	for _, p := range []*probe{user, anon, node, gateway} {
		_ = p.nc.Flush()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		// The gateway follows users' events (the TUI it serves shows
		// them): events name projects, never carry secrets.
		secrets := []string{password, login.Token, carolToken, otherNode}
		if !strings.HasPrefix(s, "gpuaas.user.") {
			secrets = append(secrets, "carols")
		}
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("a sniffer saw %q in %s", secret, s)
			}
		}
	}
}

// TestHostPermissions: a node's credential reaches its own subjects only:
// not other nodes', the API's, users' events nor JetStream.
func TestHostPermissions(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	nodeID, key := enrolledNode(t, env, "h1")
	other, _ := enrolledNode(t, env, "h2")
	n := mustDial(t, env.NATSURL, nodeOpts(nodeID, key)...)
	for _, subj := range []string{">", "gpuaas.host." + other + ".>", "gpuaas.host.*.task", api.SubjectPrefix + ".>",
		"gpuaas.user.*.>", "gpuaas.ctl.>", api.InboxPrefix(other) + ".>", "_INBOX.>", "gpuaas.gate.>"} {
		n.refusedSub(t, subj, "")
	}
	for _, subj := range []string{hostproto.MsgHeartbeat.SubjectOf(other), api.Subject(api.EndpointAllocList),
		"gpuaas.user.u-1.evt.alloc.state", "gpuaas.evt.node.changed", "gpuaas.host." + other + ".task", "$JS.API.INFO"} {
		n.refusedPub(t, subj, []byte("{}"))
	}
	// Its own subjects work: a heartbeat request is answered (refused
	// for its bad envelope, but answered on the node's inbox).
	err := api.NewClient(n.nc).Request(t.Context(), hostproto.MsgHeartbeat.SubjectOf(nodeID), map[string]string{}, nil)
	if err == nil || strings.Contains(err.Error(), "no responders") || strings.Contains(err.Error(), "timed out") {
		t.Fatalf("a heartbeat on the node's own subject got %v; want controld's answer", err)
	}
	// An unknown key with no token is just a client before login.
	k, _ := newKey(t)
	anon := mustDial(t, env.NATSURL, keyOpts(t, k)...)
	anon.refusedPub(t, hostproto.MsgHeartbeat.SubjectOf(nodeID), []byte("{}"))
	anon.refusedPub(t, hostproto.SubjectEnroll, []byte("{}"))
	// A key with an enrollment token may enroll and do nothing else; a
	// bad token is told so by the enrollment itself.
	ek, _ := newKey(t)
	enr := mustDial(t, env.NATSURL, append(keyOpts(t, ek), nats.Token("gpe_notavalidtoken"))...)
	err = keyClient(t, enr, ek).Request(t.Context(), hostproto.SubjectEnroll, hostproto.EnrollRequest{Token: "gpe_notavalidtoken",
		PublicKey: make([]byte, 32)}, nil)
	if err == nil || !strings.Contains(err.Error(), "unknown enrollment token") {
		t.Fatalf("enrolling with a bad token got %v; want unknown enrollment token", err)
	}
	enr.refusedPub(t, api.Subject(api.EndpointAuthLogin), []byte("{}"))
	enr.refusedPub(t, hostproto.MsgHeartbeat.SubjectOf(nodeID), []byte("{}"))
	enr.refusedSub(t, "gpuaas.host.>", "")
}

// TestRevocationClosesConnections: after logout (and after disabling the
// user's sessions), the token is refused on a new connection and the
// connection that used it is closed within seconds.
func TestRevocationClosesConnections(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	dave, token := env.AddUser(t, "dave@example.test", api.RoleUser)
	p := mustDial(t, env.NATSURL, userOpts(dave.ID, token)...)
	other := mustDial(t, env.NATSURL, userOpts(dave.ID, env.Login(t, "dave@example.test", "another good password"))...)
	c := api.NewClient(p.nc, api.WithToken(token))
	if _, err := c.Whoami(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, p.nc, 5*time.Second)
	t.Logf("connection closed %v after logout", time.Since(start))
	if _, err := dial(t, env.NATSURL, userOpts(dave.ID, token)...); err == nil ||
		!strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("a new connection with the logged-out token got %v; want an authorization violation", err)
	}
	// Another session of the same user is untouched.
	if _, err := api.NewClient(other.nc, api.WithToken(env.Login(t, "dave@example.test", "another good password"))).Whoami(ctx); err != nil {
		t.Fatalf("another session after logout: %v", err)
	}
	// Disabling the user ends every session of theirs, and so every
	// connection.
	start = time.Now()
	if _, err := env.Client(env.AdminToken).AdminUserDisable(ctx, dave.Email); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, other.nc, 5*time.Second)
	t.Logf("connection closed %v after the disable", time.Since(start))
}

// TestExpiredSessionRefused: a session past its end cannot connect, and
// a connection's authorization ends with its session.
func TestExpiredSessionRefused(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now())
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Now: clock.Now})
	eve, token := env.AddUser(t, "eve@example.test", api.RoleUser)
	mustDial(t, env.NATSURL, userOpts(eve.ID, token)...)
	clock.Advance(13 * time.Hour)
	if _, err := dial(t, env.NATSURL, userOpts(eve.ID, token)...); err == nil {
		t.Fatal("an expired session connected; want it refused")
	}
}

// TestOperatorIdentity: a registered operator key monitors the servers
// from the system account, read-only: no kicks, no reloads, nothing of
// the app account.
func TestOperatorIdentity(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	key, pub := newKey(t)
	if _, err := env.Client(env.AdminToken).BusIdentityAdd(t.Context(), api.BusIdentityAddRequest{PublicKey: pub,
		Kind: api.BusIdentityOperator, Name: "alice-ops"}); err != nil {
		t.Fatal(err)
	}
	op := mustDial(t, env.NATSURL, keyOpts(t, key)[0])
	m, err := op.nc.Request("$SYS.REQ.SERVER.PING.VARZ", nil, 5*time.Second)
	if err != nil || !strings.Contains(string(m.Data), `"server_id"`) {
		t.Fatalf("VARZ got %v; want the server's variables", err)
	}
	op.refusedPub(t, "$SYS.REQ.SERVER.PING.KICK", []byte(`{"cid":1}`))
	op.refusedPub(t, "$SYS.REQ.SERVER.NSOMESERVER.KICK", []byte(`{"cid":1}`))
	op.refusedPub(t, "$SYS.REQ.SERVER.NSOMESERVER.RELOAD", nil)
	op.refusedSub(t, "_INBOX_controld.>", "")

	// Revoking the key closes its connection.
	if _, err := env.Client(env.AdminToken).BusIdentityRevoke(t.Context(), api.BusIdentityRevokeRequest{Name: "alice-ops"}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, op.nc, 5*time.Second)
	if _, err := dial(t, env.NATSURL, keyOpts(t, key)[0]); err == nil {
		t.Fatal("a revoked operator key connected")
	}
}

// TestGatewayPermissions: a gateway's key may call the API and write
// recordings, but not answer the API, read nodes' subjects or other
// JetStream streams.
func TestGatewayPermissions(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	key, pub := newKey(t)
	if _, err := env.Client(env.AdminToken).BusIdentityAdd(t.Context(), api.BusIdentityAddRequest{PublicKey: pub,
		Kind: api.BusIdentityGateway, Name: "gw"}); err != nil {
		t.Fatal(err)
	}
	g := mustDial(t, env.NATSURL, keyOpts(t, key)...)
	for _, subj := range []string{">", api.SubjectPrefix + ".>", "gpuaas.host.>", "gpuaas.ctl.>", "gpuaas.evt.>", "_INBOX.>"} {
		g.refusedSub(t, subj, "")
	}
	for _, subj := range []string{"gpuaas.user.u-1.evt.alloc.state", "gpuaas.host.n-1.task", "$JS.API.STREAM.INFO.EVENTS",
		"$JS.API.STREAM.DELETE." + recstore.Stream, "$JS.API.STREAM.PURGE." + recstore.Stream,
		"$JS.API.STREAM.MSG.DELETE." + recstore.Stream, "gpuaas.rec.ts-1.meta", "$O." + api.RecordingsBucket + ".M.x",
		gateproto.GateRevokedSubject, gateproto.GateNoticeSubject} {
		g.refusedPub(t, subj, []byte("{}"))
	}
}

// TestPreLogin: a connection with a key of its own but no session reads
// only its own inbox; the API answers it, refusing what needs a login
// ("not logged in", not silence), and logging in works on it.
func TestPreLogin(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	key, _ := newKey(t)
	p := mustDial(t, env.NATSURL, keyOpts(t, key)...)
	c := keyClient(t, p, key)
	if _, err := c.AuthConfig(ctx); err != nil {
		t.Fatalf("auth.config before login: %v", err)
	}
	if _, err := c.AllocList(ctx, api.AllocListRequest{}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("alloc.list before login got %v; want unauthenticated", err)
	}
	if _, err := c.Login(ctx, api.LoginRequest{Email: controldtest.AdminEmail, Password: controldtest.AdminPassword}); err != nil {
		t.Fatalf("login: %v", err)
	}
	p.refusedSub(t, "gpuaas.user.*.>", "")
	p.refusedPub(t, "gpuaas.ctl.enroll", []byte("{}"))
}

// TestLoginLimitPerSource: failed logins from connections that have not
// logged in are counted per address, which the callout recorded for each
// connection: wrong passwords for many accounts, each on a fresh
// connection, are refused once the address has used its budget.
func TestLoginLimitPerSource(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		LoginLimits: identity.LoginLimits{Source: identity.Limit{MaxFailures: 3, Lockout: time.Minute}}})
	ctx := t.Context()
	var err error
	for i := range 5 {
		k, _ := newKey(t)
		p := mustDial(t, env.NATSURL, keyOpts(t, k)...)
		_, err = keyClient(t, p, k).Login(ctx, api.LoginRequest{Email: fmt.Sprintf("nobody%d@example.test", i), Password: "wrong password"})
		if i < 3 && !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("failure %d got %v; want unauthenticated", i+1, err)
		}
	}
	if !errors.Is(err, api.ErrRateLimited) {
		t.Fatalf("after the address's budget got %v; want rate_limited", err)
	}
	var rows int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = 'auth.login_refused'
		AND detail->>'source' = '127.0.0.1'`).Scan(&rows); err != nil || rows != 5 {
		t.Fatalf("got %d refusals audited with the source (%v); want 5", rows, err)
	}
}

// TestRevokedBeforeRecorded: a revocation that reaches controld before
// the connection it should close was recorded (connections are recorded
// in batches, off the connection's path) still closes it, for a session
// and for a key: the recorder checks what it wrote.
func TestRevokedBeforeRecorded(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, BusRecordLinger: 2 * time.Second})
	ctx := t.Context()
	frank, token := env.AddUser(t, "frank@example.test", api.RoleUser)
	user := mustDial(t, env.NATSURL, userOpts(frank.ID, token)...)
	key, pub := newKey(t)
	if _, err := env.Client(env.AdminToken).BusIdentityAdd(ctx, api.BusIdentityAddRequest{PublicKey: pub,
		Kind: api.BusIdentityOperator, Name: "early"}); err != nil {
		t.Fatal(err)
	}
	op := mustDial(t, env.NATSURL, keyOpts(t, key)[0])
	if _, err := api.NewClient(user.nc, api.WithToken(token)).Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client(env.AdminToken).BusIdentityRevoke(ctx, api.BusIdentityRevokeRequest{PublicKey: pub}); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM bus_connections WHERE principal = ANY($1)`,
		[]string{frank.ID, pub}).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d connections recorded (%v) before the revocations were handled; the test wants none yet", rows, err)
	}
	waitClosed(t, user.nc, 10*time.Second)
	waitClosed(t, op.nc, 10*time.Second)
}

// TestNodeAndEnrollmentRepliesOnlyToTheirInbox: a node's report whose
// reply subject is not its own inbox, and an enrollment without the proof
// of the key whose inbox it names, are dropped unanswered: controld never
// publishes to a subject a node or an enrolling key chose.
func TestNodeAndEnrollmentRepliesOnlyToTheirInbox(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	nodeID, key := enrolledNode(t, env, "h1")
	other, _ := enrolledNode(t, env, "h2")
	targets := []string{"gpuaas.host." + other + ".deputy", api.InboxPrefix(other) + ".x", api.EventSubject("deputy"),
		gateproto.GateRevokedSubject, "$JS.API.STREAM.PURGE." + api.EventStreamName}
	var mu sync.Mutex
	var seen []string
	for _, subj := range targets {
		if _, err := env.NC.Subscribe(subj, func(m *nats.Msg) {
			mu.Lock()
			seen = append(seen, m.Subject)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	_ = env.NC.Flush()
	n := mustDial(t, env.NATSURL, nodeOpts(nodeID, key)...)
	ek, _ := newKey(t)
	enr := mustDial(t, env.NATSURL, append(keyOpts(t, ek), nats.Token("gpe_notavalidtoken"))...)
	for _, target := range targets {
		if err := n.nc.PublishRequest(hostproto.MsgHeartbeat.SubjectOf(nodeID), target, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if err := enr.nc.PublishRequest(hostproto.SubjectEnroll, target, []byte(`{"token":"gpe_notavalidtoken"}`)); err != nil {
			t.Fatal(err)
		}
	}
	_ = n.nc.Flush()
	_ = enr.nc.Flush()
	// Requests on their own inboxes are still answered, after the others.
	err := api.NewClient(n.nc).Request(t.Context(), hostproto.MsgHeartbeat.SubjectOf(nodeID), map[string]string{}, nil)
	if err == nil || strings.Contains(err.Error(), "timed out") {
		t.Fatalf("a heartbeat on the node's own inbox got %v; want controld's answer", err)
	}
	err = keyClient(t, enr, ek).Request(t.Context(), hostproto.SubjectEnroll, hostproto.EnrollRequest{Token: "gpe_notavalidtoken",
		PublicKey: make([]byte, 32)}, nil)
	if err == nil || !strings.Contains(err.Error(), "unknown enrollment token") {
		t.Fatalf("enrolling with its proof got %v; want unknown enrollment token", err)
	}
	// Without the proof, on its own inbox: dropped too.
	if err := api.NewClient(enr.nc, api.WithTimeout(time.Second)).Request(t.Context(), hostproto.SubjectEnroll,
		hostproto.EnrollRequest{Token: "gpe_notavalidtoken", PublicKey: make([]byte, 32)}, nil); err == nil ||
		!strings.Contains(err.Error(), "timed out") {
		t.Fatalf("enrolling without the key's proof got %v; want no answer", err)
	}
	_ = env.NC.Flush()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Fatalf("controld published to subjects a node or an enrolling key chose: %v", seen)
	}
}

// TestAPIConnectionPublishesOnlyToInboxes: the connection controld serves
// the API on may publish to inboxes and nowhere else — not to events,
// streams, buckets, the JetStream API, nodes, gateways nor controld's own
// inbox — so that no reply subject can make it write there even past a
// bug in the reply check.
func TestAPIConnectionPublishesOnlyToInboxes(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	p := mustDial(t, env.NATSURL, bus.WithKey(env.Bus.Keys.API))
	for _, subj := range []string{api.UserEventSubject("u-1", "alloc.state"), api.EventSubject("alloc.state"),
		"$JS.API.STREAM.PURGE." + api.EventStreamName, "gpuaas.rec.ts-1.meta", "gpuaas.rec.ts-1.c.0", "gpuaas.host.n-1.task",
		hostproto.MsgResult.SubjectOf("n-1"), gateproto.GateNoticeSubject, gateproto.GateRevokedSubject,
		api.ControldInboxPrefix + ".x", api.ControldAPIInboxPrefix + ".x", api.Subject(api.EndpointAuthLogin),
		"$SYS.REQ.USER.AUTH", "$JS.API.STREAM.INFO." + api.EventStreamName} {
		p.refusedPub(t, subj, []byte("{}"))
	}
	if err := p.nc.Publish(api.InboxPrefix("u-1")+".x", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = p.nc.Flush()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, err := range p.errs {
		if strings.Contains(err.Error(), "_inbox.u-1") {
			t.Fatalf("publishing to an inbox was refused: %v", err)
		}
	}
}
