package sshgate

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// env is a gateway in front of a real controld (a private Postgres
// database and an embedded NATS server) with one slice node, whose
// terminal server is a real SSH server on loopback (testHostd). No hostd
// runs: the node's terminal address and host key, and the state of
// allocations, are written in SQL where hostd would have reported them.
type env struct {
	t      testing.TB
	ctl    *controldtest.Env
	admin  *api.Client // the seeded admin's
	client *api.Client // the gateway's: a service token with role gateway
	node   string      // the node every allocation is on
	hostd  *testHostd  // its terminal server
	// hostCA and internalCA are the CA keys controld lists (ssh.cas).
	hostCA, internalCA []gossh.PublicKey
	gw                 *Gateway
	addr               string // the gateway's address
	cancel             context.CancelFunc
	done               chan error
	stopOnce           sync.Once
	users              atomic.Int64 // users made so far, for unique emails
}

type envOptions struct {
	// hostdKey is the test hostd's host key (default: a fresh plain key).
	hostdKey gossh.Signer
	// config adjusts the gateway's Config before New.
	config func(*Config)
	// gatewayNATS, when set, makes the gateway's own NATS connection from
	// the server's URL and the options that carry its identity (default:
	// a direct connection).
	gatewayNATS func(url string, opts ...nats.Option) *nats.Conn
	// controldLog is controld's logger (default: the test's log).
	controldLog *slog.Logger
}

// allocSKU is what test allocations are: one GPU of the env's slice node.
const allocSKU = "h200-slice"

func newEnv(t testing.TB, opts envOptions) *env {
	t.Helper()
	ctx := context.Background()
	ctl := controldtest.Start(t, controldtest.Options{Nodes: []node.Spec{controldtest.SliceNode("slice-1", "H200")},
		Log: opts.controldLog})
	e := &env{t: t, ctl: ctl, admin: ctl.Client(ctl.AdminToken)}
	nodes, err := ctl.Server.Nodes(ctx)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("got nodes %+v, %v; want the one seeded", nodes, err)
	}
	e.node = nodes[0].ID
	var gatewayKey ed25519.PrivateKey
	e.client, gatewayKey = ctl.GatewayVia(t, "sshgate", opts.gatewayNATS)
	cas, err := e.client.SSHCAs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.hostCA, e.internalCA = parseTrusted(t, cas.Host), parseTrusted(t, cas.Internal)

	hostdKey := opts.hostdKey
	if hostdKey == nil {
		hostdKey = sshtest.NewSigner(t)
	}
	e.hostd = startTestHostd(t, e.node, e.internalCA, hostdKey)
	e.setTerminal(e.hostd.addr, hostdKey.PublicKey())

	cfg := Config{
		Listen:       "127.0.0.1:0",
		HostKey:      sshtest.NewKey(t),
		GatewayKey:   gatewayKey,
		Client:       e.client,
		RecordingDir: t.TempDir(),
		// testHostd speaks SSH only; the link is tested against hostd's
		// own terminal server (e2e_test.go, hostd/term, e2e/).
		NodeTransport: TransportSSH,
		Log:           testutil.Logger(t),
	}
	if opts.config != nil {
		opts.config(&cfg)
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	runCtx, cancel := context.WithCancel(ctx)
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- gw.Run(runCtx) }()
	select {
	case <-gw.Ready():
	case err := <-e.done:
		t.Fatalf("gateway Run: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("gateway not ready after 20s")
	}
	e.addr = gw.Addr().String()
	t.Cleanup(e.stop) // before controld's cleanup: cleanups run last first
	return e
}

// stop ends Run and checks it returned cleanly. Stopping again does
// nothing.
func (e *env) stop() {
	e.stopOnce.Do(func() {
		e.cancel()
		select {
		case err := <-e.done:
			if err != nil {
				e.t.Errorf("gateway Run returned %v; want nil", err)
			}
		case <-time.After(30 * time.Second):
			e.t.Error("gateway Run did not return 30s after its context ended")
		}
	})
}

func parseTrusted(t testing.TB, lines []string) []gossh.PublicKey {
	t.Helper()
	keys, err := sshcert.ParseTrusted([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// setTerminal points the node at the terminal server at addr, whose host
// key hostd reported as hostKey (nil: none), as hostd's heartbeats would.
func (e *env) setTerminal(addr string, hostKey gossh.PublicKey) {
	e.t.Helper()
	line := ""
	if hostKey != nil {
		line = strings.TrimSpace(string(gossh.MarshalAuthorizedKey(hostKey)))
	}
	if _, err := e.ctl.Server.Pool().Exec(context.Background(),
		`UPDATE nodes SET terminal_addr = $2, terminal_host_key = $3 WHERE id = $1`, e.node, addr, line); err != nil {
		e.t.Fatal(err)
	}
}

// caKey is the active private key of controld's CA name, read from
// ssh_ca_keys (stored unsealed: the test controld has no key-encryption
// key), for certificates controld would not mint.
func (e *env) caKey(name string) ed25519.PrivateKey {
	e.t.Helper()
	var pemBytes []byte
	if err := e.ctl.Server.Pool().QueryRow(context.Background(),
		`SELECT private_key FROM ssh_ca_keys WHERE ca = $1 AND active`, name).Scan(&pemBytes); err != nil {
		e.t.Fatalf("read the %s CA key: %v", name, err)
	}
	k, err := sshcert.ParsePrivateKey(pemBytes, nil)
	if err != nil {
		e.t.Fatalf("read the %s CA key: %v", name, err)
	}
	return k
}

// authority is controld's CA name, as it signs now.
func (e *env) authority(name string) *sshcert.Authority {
	e.t.Helper()
	a, err := sshcert.New(name, e.caKey(name))
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// user is a gpuaas user with a key and a certificate from the user CA.
type user struct {
	id     string
	key    ed25519.PrivateKey
	signer gossh.Signer
	cert   *gossh.Certificate
	auth   gossh.Signer // the certificate signer

	token   string      // the user's session token ("" when not logged in here)
	client  *api.Client // with that token
	project string      // a project the user owns
	email   string
}

// userPassword is the password of the users newUser adds.
const userPassword = "another good password"

// newUser adds a user to controld, with a project of their own (so no
// other test user may open their allocations), and logs them in for a
// certificate as `gpuaas login` does.
func (e *env) newUser() *user {
	e.t.Helper()
	n := e.users.Add(1)
	u, token := e.ctl.AddUser(e.t, fmt.Sprintf("user%d@example.test", n), api.RoleUser)
	c := e.ctl.Client(token)
	p, err := c.ProjectCreate(context.Background(), api.ProjectCreateRequest{Name: fmt.Sprintf("proj-%d", n)})
	if err != nil {
		e.t.Fatal(err)
	}
	// Funded as the seeded project is: alloc.create wants a runway.
	e.ctl.Credit(e.t, p.Name, controldtest.DefaultCreditMinor)
	out := login(e.t, c, u.ID)
	out.token, out.client, out.project, out.email = token, c, p.Name, u.Email
	return out
}

// newLogin is u logged in a second time: another login session, with its
// own token, key and certificate.
func (e *env) newLogin(u *user) *user {
	e.t.Helper()
	token := e.ctl.Login(e.t, u.email, userPassword)
	c := e.ctl.Client(token)
	out := login(e.t, c, u.id)
	out.token, out.client, out.project, out.email = token, c, u.project, u.email
	return out
}

// login gives a user a fresh key and a certificate for it from controld's
// user CA (ssh.cert), as `gpuaas login` does.
func login(t testing.TB, c *api.Client, id string) *user {
	t.Helper()
	u := &user{id: id, key: sshtest.NewKey(t)}
	u.signer = sshtest.SignerOf(t, u.key)
	resp, err := c.SSHCert(context.Background(), api.SSHCertRequest{PublicKey: string(gossh.MarshalAuthorizedKey(u.signer.PublicKey()))})
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(resp.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	u.cert = pub.(*gossh.Certificate)
	u.auth = sshtest.CertSigner(t, u.cert, u.signer)
	return u
}

// relogin is u logged in again: a new key and certificate, same user.
func (e *env) relogin(u *user) *user {
	e.t.Helper()
	out := login(e.t, u.client, u.id)
	out.token, out.client, out.project, out.email = u.token, u.client, u.project, u.email
	return out
}

// userWithCert is user id with a certificate from ca (not controld's).
func (e *env) userWithCert(ca *sshcert.Authority, id string) *user {
	e.t.Helper()
	u := &user{id: id, key: sshtest.NewKey(e.t)}
	u.signer = sshtest.SignerOf(e.t, u.key)
	cert, err := ca.SignUser(u.signer.PublicKey(), sshcert.UserCert{UserID: id, KeyID: id + "@example.test", MaxTTL: time.Hour}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	u.cert = cert
	u.auth = sshtest.CertSigner(e.t, cert, u.signer)
	return u
}

// addAlloc has u create an allocation in their project and makes it
// active, as provisioning would (no hostd runs), and returns its id.
func (e *env) addAlloc(u *user) string {
	e.t.Helper()
	ctx := context.Background()
	a, err := u.client.AllocCreate(ctx, api.AllocCreateRequest{Project: u.project, SKU: allocSKU, GPUs: 1})
	if err != nil {
		e.t.Fatalf("alloc create: %v", err)
	}
	if a.NodeID != e.node {
		e.t.Fatalf("allocation %s placed on %q; want %s", a.ID, a.NodeID, e.node)
	}
	if _, err := e.ctl.Server.Pool().Exec(ctx, `UPDATE allocations SET state = $2, version = version + 1 WHERE id = $1`,
		a.ID, api.AllocActive); err != nil {
		e.t.Fatal(err)
	}
	return a.ID
}

// authorizedUsers lists the user ids gate.authorize was asked about,
// granted or refused, in order, from controld's audit log.
func (e *env) authorizedUsers() []string {
	e.t.Helper()
	rows, err := e.ctl.Server.Pool().Query(context.Background(), `SELECT COALESCE(detail->>'user_id', detail->'request'->>'user_id', '')
		FROM audit_logs WHERE action IN ('gate.authorize', 'gate.authorize_refused') ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// endedSession waits until the last session started of the given kind
// (and command, unless empty) has ended in controld's session index, and
// returns it.
func (e *env) endedSession(t *testing.T, kind, command string) api.TerminalSession {
	t.Helper()
	var got api.TerminalSession
	testutil.Eventually(t, fmt.Sprintf("a %s session %q indexed and ended", kind, command), func() bool {
		list, err := e.admin.SessionList(context.Background(), api.SessionListRequest{}) // newest first
		if err != nil {
			return false
		}
		i := slices.IndexFunc(list.Sessions, func(ts api.TerminalSession) bool {
			return ts.Kind == kind && (command == "" || ts.Command == command)
		})
		if i < 0 || list.Sessions[i].EndedAt == nil {
			return false
		}
		got = list.Sessions[i]
		return true
	})
	return got
}

// clientConfig authenticates as user with auth, and accepts only the
// gateway's host certificate from controld's host CA.
func (e *env) clientConfig(sshUser string, auth ...gossh.AuthMethod) *gossh.ClientConfig {
	return &gossh.ClientConfig{
		User:            sshUser,
		Auth:            auth,
		HostKeyCallback: sshcert.HostKeyCallback(e.hostCA, time.Now),
		Timeout:         10 * time.Second,
	}
}

// dial connects to the gateway as u, user name sshUser.
func (e *env) dial(u *user, sshUser string) *gossh.Client {
	e.t.Helper()
	c, err := gossh.Dial("tcp", e.addr, e.clientConfig(sshUser, gossh.PublicKeys(u.auth)))
	if err != nil {
		e.t.Fatalf("dial gateway as %s@%s: %v", u.id, sshUser, err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}
