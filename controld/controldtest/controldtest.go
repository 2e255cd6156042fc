// Package controldtest starts a real controld for tests: a private
// Postgres database cloned from the migrated template, an embedded NATS
// server, and a seeded admin, project and nodes. controld runs on the bus
// as in devenv (the whole platform), through devenv/controlplane.
package controldtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// Template is the migrated database every test database is cloned from.
var Template = testutil.NewTemplate("controld", store.Migrate)

// Admin credentials of every test environment.
const (
	AdminEmail    = "admin@example.test"
	AdminPassword = "correct horse battery"
	ProjectName   = "testproj"
)

// Options adjust an environment.
type Options struct {
	// SecretsKey seals project secrets (default: a random key of the
	// test's, shared by its replicas).
	SecretsKey *secrets.Key
	// Nodes to register with approved slots (default: DefaultNodes()).
	Nodes []node.Spec
	// NoNodes registers none.
	NoNodes bool
	// Now is the clock (default time.Now).
	Now  func() time.Time
	OIDC identity.OIDCConfig
	// MaxConns of controld's pool.
	MaxConns int32
	// Hosts tunes the hostd side (heartbeats, deadlines, auto-approval).
	Hosts controld.HostsConfig
	// SSHCertTTL and GatewayAddr are passed to controld.
	SSHCertTTL  time.Duration
	GatewayAddr string
	// Billing tunes billing (window, grace, threshold, SMTP).
	Billing controld.BillingConfig
	// Idle tunes idle release (minimum period, warning lead).
	Idle controld.IdleConfig
	// Registry is the OCI registry controld verifies images against.
	Registry controld.RegistryConfig

	// APIRateLimit is passed to controld; left zero, tests are not
	// throttled (controld's own default is 50 requests/s in bursts of 200,
	// which polling loops and benchmarks would trip over).
	APIRateLimit controld.RateLimit
	// PreLoginRateLimit and PreLoginSourceRateLimit are passed to
	// controld; left zero, tests are not limited either.
	PreLoginRateLimit, PreLoginSourceRateLimit controld.RateLimit
	// Streams is passed to controld.
	Streams controld.StreamLimits
	// LoginLimits and InviteTTL are passed to controld (zero: its defaults).
	LoginLimits identity.LoginLimits
	InviteTTL   time.Duration

	// DSN is a database to use instead of a fresh clone of Template.
	DSN string
	// CreditMinor credits the test project with that much (minor units)
	// at the start, as `gpuaas dev` credits its project (default
	// DefaultCreditMinor). A project without credit cannot rent:
	// alloc.create wants the balance to last billing.Settings.MinRunway
	// (Env.Credit funds other projects).
	CreditMinor int64
	// Unfunded leaves the test project at $0 (tests that book their own
	// credits and check the ledger to the cent).
	Unfunded bool
	// NoSeed starts from the database as it is: no catalog, admin,
	// project nor nodes, and Env.AdminToken is empty.
	NoSeed bool

	// Stripe and HTTPAddr are passed to controld (payments tests).
	Stripe   payments.Settings
	HTTPAddr string

	// MetricsAddr and OutboxMaxAttempts are passed to controld.
	MetricsAddr       string
	OutboxMaxAttempts int

	// BusRecordLinger is passed to controld.
	BusRecordLinger time.Duration

	// Log is controld's logger (default: through t.Log); replicas started
	// with StartReplica log through t.Log.
	Log *slog.Logger

	// SessionCacheTTL is passed to controld (identity.Settings).
	SessionCacheTTL time.Duration

	// Partition is passed to controld (serving.go: when a replica that
	// cannot reach Postgres or NATS stops serving; lease TTLs).
	Partition controld.PartitionTuning

	// Webhooks is passed to controld (where deliveries may go, retries).
	Webhooks controld.WebhookConfig

	// PlainBus runs NATS without the trust model (no accounts, no
	// callout: anyone may do anything), only as the baseline of the
	// callout's benchmarks.
	PlainBus bool
}

// DefaultCreditMinor is the test project's credit: $100, as `gpuaas dev`
// credits its project (devenv.CreditMinor).
const DefaultCreditMinor = 100_00

// Env is a running controld with what tests need to drive it.
type Env struct {
	Server  *controld.Server
	NATSURL string
	// Bus is the NATS server, with the auth callout answered by Server.
	Bus *testutil.Bus
	// NC is controld's own connection (every permission). The API does
	// not answer on it (its replies would go to controld's own inbox):
	// Client is on a connection of its own.
	NC *nats.Conn
	// KeyConn is a connection that signed in with a key of its own, as a
	// CLI that has not logged in has; Client's requests go on it, with
	// the key's reply proof and the token they are given, as the CLI's do
	// on the connection it logged in on.
	KeyConn    *nats.Conn
	keyProof   string
	Admin      api.User
	AdminToken string
	Project    api.Project
	// DSN is the test database.
	DSN string

	ctl  **controlplane.Controld // the running controld, stopped at the test's end
	opts Options
}

// startControld runs controld on bus b and database dsn.
func startControld(t testing.TB, b *testutil.Bus, dsn string, opts Options) *controlplane.Controld {
	t.Helper()
	log := opts.Log
	if log == nil {
		log = testutil.Logger(t)
	}
	ctl, err := controlplane.Start(context.Background(), controlplane.Config{URL: b.URL, Keys: b.Keys, Controld: controld.Config{
		DatabaseURL: dsn, BusRecordLinger: opts.BusRecordLinger,
		Identity: identity.Settings{BcryptCost: bcrypt.MinCost, OIDC: opts.OIDC, LoginLimits: opts.LoginLimits, InviteTTL: opts.InviteTTL,
			SessionCacheTTL: opts.SessionCacheTTL},
		Now: opts.Now, Log: log, Hosts: opts.Hosts, MaxConns: opts.MaxConns, QueueInterval: 100 * time.Millisecond,
		SSHCertTTL: opts.SSHCertTTL, GatewayAddr: opts.GatewayAddr, Billing: opts.Billing, Idle: opts.Idle,
		Stripe: opts.Stripe, HTTPAddr: opts.HTTPAddr, APIRateLimit: opts.APIRateLimit,
		PreLoginRateLimit: opts.PreLoginRateLimit, PreLoginSourceRateLimit: opts.PreLoginSourceRateLimit, Streams: opts.Streams,
		MetricsAddr: opts.MetricsAddr, OutboxMaxAttempts: opts.OutboxMaxAttempts, Partition: opts.Partition,
		Registry: opts.Registry, SecretsKey: opts.SecretsKey,
		Webhooks: opts.Webhooks}})
	if err != nil {
		t.Fatalf("controld: %v", err)
	}
	return ctl
}

// Restart stops controld and starts a new one with the same options on the
// same bus and database, as an operator's restart does: nodes and clients
// stay connected to the bus. down, when not nil, runs while no controld
// runs (to age the database as a long outage would). Server and NC are the
// new controld's afterwards; tokens stay valid.
func (e *Env) Restart(t testing.TB, down func()) {
	t.Helper()
	if err := (*e.ctl).Stop(); err != nil {
		t.Fatalf("controld stop: %v", err)
	}
	if down != nil {
		down()
	}
	ctl := startControld(t, e.Bus, e.DSN, e.opts)
	*e.ctl = ctl
	e.Server, e.NC = ctl.Server, ctl.NC
}

// Stop stops controld as SIGTERM stops the daemon (its drain included)
// and returns what its run returned; the test's end stops nothing more.
func (e *Env) Stop() error { return (*e.ctl).Stop() }

// StartReplica starts another controld replica on the same bus and
// database, with the same options but log (nil: through t.Log), as an
// operator runs several; it is stopped at the test's end unless stopped
// before (Stop may be called twice).
func (e *Env) StartReplica(t testing.TB, log *slog.Logger) *controlplane.Controld {
	t.Helper()
	opts := e.opts
	opts.Log = log
	ctl := startControld(t, e.Bus, e.DSN, opts)
	t.Cleanup(func() {
		if err := ctl.Stop(); err != nil {
			t.Errorf("controld replica run: %v", err)
		}
	})
	return ctl
}

// Crash cuts the env's controld off the bus at once, as a kill does: its
// connections close, and a request it holds never gets a reply; its
// database work in flight goes on until the test's end stops it. next (a
// StartReplica) becomes the env's controld: Server and NC are its.
func (e *Env) Crash(t testing.TB, next *controlplane.Controld) {
	t.Helper()
	old := *e.ctl
	old.Conns.Close()
	t.Cleanup(func() { _ = old.Stop() })
	*e.ctl = next
	e.Server, e.NC = next.Server, next.NC
}

// SliceNode is an 8-GPU slice host spec, 4 GPUs on each of two NUMA nodes.
func SliceNode(name, model string) node.Spec { return sim.SliceHost(name, model) }

// BaremetalNode is an 8-GPU bare-metal host spec.
func BaremetalNode(name, model string) node.Spec { return sim.BaremetalHost(name, model) }

// DefaultNodes is the `gpuaas dev` fleet: one H200 slice host and one
// H100 bare-metal host.
func DefaultNodes() []node.Spec { return sim.DevFleet() }

// Start runs controld until the test ends.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	for _, l := range []*controld.RateLimit{&opts.APIRateLimit, &opts.PreLoginRateLimit, &opts.PreLoginSourceRateLimit} {
		if *l == (controld.RateLimit{}) {
			l.Disabled = true
		}
	}
	dsn := opts.DSN
	if dsn == "" {
		dsn = testutil.Postgres(t, Template)
	}
	if opts.SecretsKey == nil {
		opts.SecretsKey = RandomSecretsKey(t)
	}
	var b *testutil.Bus
	if opts.PlainBus {
		b = testutil.PlainNATS(t)
	} else {
		b = testutil.NATS(t)
	}
	ctx := context.Background()
	ctl := startControld(t, b, dsn, opts)
	held := &ctl
	t.Cleanup(func() {
		if err := (*held).Stop(); err != nil {
			t.Errorf("controld run: %v", err)
		}
	})
	srv, nc := ctl.Server, ctl.NC
	keyConn, proof := connectWithKey(t, b)
	if opts.NoSeed {
		return &Env{Server: srv, NATSURL: b.URL, Bus: b, NC: nc, KeyConn: keyConn, keyProof: proof, DSN: dsn, ctl: held, opts: opts}
	}
	credit := opts.CreditMinor
	if credit == 0 {
		credit = DefaultCreditMinor
	}
	if opts.Unfunded {
		credit = 0
	}
	nodes := opts.Nodes
	if nodes == nil && !opts.NoNodes {
		nodes = DefaultNodes()
	}
	res, err := srv.ApplySeed(ctx, controld.Seed{Catalog: catalog.Defaults, AdminEmail: AdminEmail,
		AdminPassword: AdminPassword, Project: ProjectName, Nodes: nodes, ApproveSlots: true,
		InitialCreditMinor: credit})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	env := &Env{Server: srv, NATSURL: b.URL, Bus: b, NC: nc, KeyConn: keyConn, keyProof: proof, Admin: res.Admin,
		Project: res.Project, DSN: dsn, ctl: held, opts: opts}
	env.AdminToken = env.Login(t, AdminEmail, AdminPassword)
	return env
}

// UserConn connects to the bus as a user does: the session token is the
// connection's credential, the auth callout decides its permissions, and
// replies come to the user's own inbox.
func (e *Env) UserConn(t testing.TB, userID, token string) *nats.Conn {
	t.Helper()
	return testutil.Connect(t, e.NATSURL, nats.Token(token), nats.CustomInboxPrefix(api.UserInboxPrefix(userID)))
}

// UserClient is an API client on the user's own connection (UserConn).
func (e *Env) UserClient(t testing.TB, userID, token string) *api.Client {
	t.Helper()
	return api.NewClient(e.UserConn(t, userID, token), api.WithToken(token), api.WithProject(e.Project.Name))
}

// GatewayClient is the client of Gateway.
func (e *Env) GatewayClient(t testing.TB, name string) *api.Client {
	t.Helper()
	c, _ := e.Gateway(t, name)
	return c
}

// Gateway registers a fresh gateway key called name and returns a client
// as sshgate has one — on the gateway's own connection (its key proves it
// to the auth callout), logging in to controld with that key for
// short-lived tokens — and the key itself, which sshgate also presents to
// nodes once controld certified it (sshgate.Config.GatewayKey).
func (e *Env) Gateway(t testing.TB, name string) (*api.Client, ed25519.PrivateKey) {
	t.Helper()
	return e.GatewayVia(t, name, nil)
}

// GatewayVia is Gateway with the gateway's connection made by dial, given
// the URL and the options that carry the gateway's identity (e.g. through
// a proxy the test cuts); nil dials directly.
func (e *Env) GatewayVia(t testing.TB, name string, dial func(url string, opts ...nats.Option) *nats.Conn) (*api.Client, ed25519.PrivateKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := bus.KeyFromEd25519Seed(priv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	nk, _ := key.PublicKey()
	if _, err := e.Server.EnsureBusIdentity(context.Background(), api.BusIdentityAddRequest{PublicKey: nk,
		Kind: api.BusIdentityGateway, Name: name}, e.Admin.ID); err != nil {
		t.Fatalf("register gateway key: %v", err)
	}
	if dial == nil {
		dial = func(url string, opts ...nats.Option) *nats.Conn { return testutil.Connect(t, url, opts...) }
	}
	opts, err := controlplane.GatewayOptions(key)
	if err != nil {
		t.Fatal(err)
	}
	client, err := controlplane.GatewayClient(dial(e.NATSURL, opts...), key)
	if err != nil {
		t.Fatal(err)
	}
	return client, priv
}

// Client returns an API client with token and the test project, on
// KeyConn.
func (e *Env) Client(token string, opts ...api.ClientOption) *api.Client {
	return api.NewClient(e.KeyConn, append([]api.ClientOption{api.WithToken(token), api.WithProject(e.Project.Name),
		api.WithReplyProof(e.keyProof)}, opts...)...)
}

// AnonClient is an API client without a session on KeyConn, as a CLI
// that has not logged in has.
func (e *Env) AnonClient() *api.Client {
	return api.NewClient(e.KeyConn, api.WithReplyProof(e.keyProof))
}

// RequestMsg sends a raw API request on KeyConn with the key's reply
// proof, for tests that build the message themselves.
func (e *Env) RequestMsg(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(api.HeaderReplyProof, e.keyProof)
	return e.KeyConn.RequestMsgWithContext(ctx, msg)
}

// KeyClient connects to the bus with a key of its own, as a CLI that has
// not logged in does (extra: e.g. a dialer from another address), and
// returns an API client on it carrying the key's reply proof; the
// connection closes at the test's end.
func (e *Env) KeyClient(t testing.TB, extra ...nats.Option) *api.Client {
	t.Helper()
	nc, proof := connectWithKey(t, e.Bus, extra...)
	return api.NewClient(nc, api.WithReplyProof(proof))
}

// connectWithKey connects to b with a fresh key, as a CLI that has not
// logged in does, and returns the connection and the key's reply proof.
func connectWithKey(t testing.TB, b *testutil.Bus, extra ...nats.Option) (*nats.Conn, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	opts, proof, err := api.KeyConnOptions(kp)
	if err != nil {
		t.Fatal(err)
	}
	// The callout decides the connection; on a loaded machine it may miss
	// the server's deadline once: a connection is not what is tested.
	var nc *nats.Conn
	testutil.EventuallyWithin(t, 30*time.Second, "a connection with a key of its own", func() bool {
		nc, err = bus.Connect(b.URL, t.Name(), append(opts, extra...)...)
		return err == nil
	})
	t.Cleanup(nc.Close)
	return nc, proof
}

// Credit books amount (minor units; negative debits) to a project, by
// name or id, as an admin does with `gpuaas admin credit`, and returns
// the new balance.
func (e *Env) Credit(t testing.TB, project string, amount int64) int64 {
	t.Helper()
	r, err := e.Client(e.AdminToken).AdminCredit(context.Background(),
		api.CreditRequest{Project: project, AmountMinor: amount, Reason: "test credit"})
	if err != nil {
		t.Fatalf("credit %s with %d: %v", project, amount, err)
	}
	return r.BalanceMinor
}

// Login logs a local user in and returns the session token.
func (e *Env) Login(t testing.TB, email, password string) string {
	t.Helper()
	resp, err := e.AnonClient().Login(context.Background(), api.LoginRequest{Email: email, Password: password})
	if err != nil {
		t.Fatalf("login %s: %v", email, err)
	}
	return resp.Token
}

// AddUser creates a local user with role and returns their token.
func (e *Env) AddUser(t testing.TB, email, role string) (api.User, string) {
	t.Helper()
	const pw = "another good password"
	u, err := e.Server.Identity().CreateLocalUser(context.Background(), e.Server.Pool(),
		identity.NewUser{Email: email, Role: role, Password: pw})
	if err != nil {
		t.Fatalf("add user: %v", err)
	}
	return u, e.Login(t, email, pw)
}
