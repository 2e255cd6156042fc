// Package controld is the control daemon: the only writer of Postgres. It
// serves the API as a NATS micro service and runs the singleton loops
// (outbox relay, queue placement, billing). Stateless apart from Postgres, so N
// replicas may run side by side.
//
// api.go adapts handlers to micro (authentication, idempotency, errors);
// each domain's endpoints are in handlers_<domain>.go, over the domain
// package that owns its tables (controld/alloc, node, identity, ...).
package controld

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"golang.org/x/sync/errgroup"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/faults"
	"github.com/gpuaas/gpuaas/controld/hosts"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/lease"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/controld/webhooks"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/registry"
)

// Config configures controld.
type Config struct {
	// DatabaseURL of the Postgres database. Required.
	DatabaseURL string
	// NATS is an established connection: JetStream, events, tasks to the
	// nodes, the auth callout. Required.
	NATS *nats.Conn
	// APINATS is the connection the API and the nodes' reports are served
	// on; the NATS servers let it publish only to inboxes
	// (bus.ServerAuth.Config), so that no request can make controld write
	// anywhere else. Nil serves them on NATS (a bus without the trust
	// model).
	APINATS *nats.Conn
	// BusKeys, when set, has controld answer the NATS servers' auth
	// callout (controld/busauth): the servers then let in no connection
	// controld has not decided. Without it the servers must decide by
	// themselves (tests of other parts only).
	BusKeys *bus.Keys
	// SystemNATS is controld's connection in NATS's system account, used
	// to close the connections of revoked sessions within seconds; without
	// it they last until their authorization expires.
	SystemNATS *nats.Conn
	// BusRecordLinger tunes the callout's connection recorder (see
	// busauth.Config.RecordLinger).
	BusRecordLinger time.Duration
	// MaxConns of the database pool (default 32).
	MaxConns int32
	// Identity tunes sessions, passwords, OIDC exchange, failed-login
	// limits and invites (see identity.Settings).
	Identity identity.Settings
	// APIRateLimit is each user's token bucket for API calls (default
	// 50 requests/s in bursts of 200).
	APIRateLimit RateLimit
	// PreLoginRateLimit bounds the requests of each connection that has
	// not logged in (default 5/s in bursts of 20), and
	// PreLoginSourceRateLimit those of every such connection from one
	// client address together (default 20/s in bursts of 60).
	PreLoginRateLimit, PreLoginSourceRateLimit RateLimit
	// QueueInterval is how often queued requests are retried (default 2s).
	QueueInterval time.Duration
	// MaxInflight bounds requests handled at once (default 256).
	MaxInflight int
	// RequestTimeout bounds one request's work (default 30s).
	RequestTimeout time.Duration
	// Hosts tunes the hostd side: heartbeats, task deadlines, discovery.
	Hosts hosts.Tuning
	// SSHCertTTL caps user SSH certificates (default 12h); a certificate
	// never outlives the session that asked for it either.
	SSHCertTTL time.Duration
	// GatewayAddr is where users ssh to ("host:port"), told to clients by
	// ssh.cas; empty when unknown.
	GatewayAddr string
	// AppsURL is the URL pattern of exposures, "*" standing for their host
	// label ("https://*.apps.example.com", "https://*.localhost:8443" in
	// gpuaas dev); empty: replies carry the label alone (docs/expose.md).
	AppsURL string
	// CAKeyEncryptionKey, when set (32 random bytes), seals the SSH CA
	// private keys at rest (see controld/ca).
	CAKeyEncryptionKey []byte
	// SecretsKey seals project secrets at rest (controld/secrets, from
	// --secrets-key-file); nil: secret.set and jobs naming secrets are
	// refused as unavailable.
	SecretsKey *secrets.Key
	// DatabaseRole is the role controld's pool acts as (SET ROLE on every
	// connection; default store.AppRole, which may only read and append to
	// the ledger). Migrations run as the role DatabaseURL logs in as.
	DatabaseRole string
	// Billing tunes accrual, low-balance warnings and depletion.
	Billing billing.Settings
	Now     func() time.Time
	Log     *slog.Logger

	// Stripe configures top-ups and refunds (controld/payments); without
	// a secret key billing.topup and admin.refund answer unavailable.
	Stripe payments.Settings
	// StreamReplicas is how many copies JetStream keeps of the EVENTS
	// stream and the recordings bucket (default 1; 3 on a NATS cluster of
	// three servers). Existing ones are updated to it at start.
	StreamReplicas int
	// Streams bound what the EVENTS and recordings streams keep.
	Streams StreamLimits

	// HTTPAddr is where the HTTP server for Stripe webhooks listens
	// ("127.0.0.1:8080", port 0 for any); empty disables it.
	HTTPAddr string
	// OutboxMaxAttempts is how often the relay tries to publish an event
	// before it moves it to dead (default 20; see `gpuaas ops outbox`).
	OutboxMaxAttempts int
	// MetricsAddr is where /healthz, /readyz and /metrics are served
	// (internal/obs; port 0 for any); empty disables them.
	MetricsAddr string
	// DrainTimeout bounds the graceful stop when Run's context ends
	// (SIGTERM): requests in flight and node results being applied get
	// this long to finish (default DefaultDrainTimeout). The systemd unit's
	// TimeoutStopSec leaves room above it.
	DrainTimeout time.Duration

	// Idle tunes idle release and maximum durations (controld/idle): the
	// shortest period users may set, the warning's lead, the evaluator's
	// interval.
	Idle idle.Settings
	// Partition tunes how a replica that cannot reach Postgres or NATS
	// stops serving, and the singletons' leases (serving.go).
	Partition PartitionTuning
	// Registry is the OCI registry images are verified against and
	// imported into (internal/registry, docs/images.md).
	Registry RegistryConfig
	// ImageVerifyTimeout bounds one background verification of an image
	// (images.Verifier): every layer is read; 30 min by default.
	ImageVerifyTimeout time.Duration
	// Webhooks tune webhook deliveries: where they may go (by default
	// public https addresses only) and how they are retried.
	Webhooks webhooks.Settings
}

// RegistryConfig is registry.Settings, by the name controld's callers
// know it.
type RegistryConfig = registry.Settings

// DefaultDrainTimeout is Config.DrainTimeout's default.
const DefaultDrainTimeout = 20 * time.Second

// HostsConfig is hosts.Tuning, by the name controld's callers know it.
type HostsConfig = hosts.Tuning

// BillingConfig is billing.Settings, by the name controld's callers know
// it.
type BillingConfig = billing.Settings

// IdleConfig is idle.Settings, by the name controld's callers know it.
type IdleConfig = idle.Settings

// WebhookConfig is webhooks.Settings, by the name controld's callers know
// it.
type WebhookConfig = webhooks.Settings

// SMTPConfig is billing.SMTP: a relay for billing emails.
type SMTPConfig = billing.SMTP

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.DatabaseURL == "" {
		return errors.New("controld: DatabaseURL is required")
	}
	if c.NATS == nil {
		return errors.New("controld: NATS connection is required")
	}
	if c.APINATS == nil {
		c.APINATS = c.NATS
	}
	if c.MaxConns == 0 {
		c.MaxConns = 32
	}
	if c.QueueInterval == 0 {
		c.QueueInterval = 2 * time.Second
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = 256
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.DrainTimeout < 0 {
		return errors.New("controld: DrainTimeout must be positive")
	}
	if c.SSHCertTTL == 0 {
		c.SSHCertTTL = 12 * time.Hour
	}
	if c.SSHCertTTL < 0 {
		return errors.New("controld: SSHCertTTL must be positive")
	}
	if c.DatabaseRole == "" {
		c.DatabaseRole = store.AppRole
	}
	if err := c.Streams.CheckAndSetDefaults(); err != nil {
		return err
	}
	if c.StreamReplicas == 0 {
		c.StreamReplicas = 1
	}
	if c.StreamReplicas < 0 || c.StreamReplicas > 5 {
		return fmt.Errorf("controld: StreamReplicas must be 1 to 5, got %d", c.StreamReplicas)
	}
	if err := c.APIRateLimit.CheckAndSetDefaults(); err != nil {
		return err
	}
	if err := c.PreLoginRateLimit.defaults(DefaultPreLoginRate, DefaultPreLoginBurst); err != nil {
		return err
	}
	if err := c.PreLoginSourceRateLimit.defaults(DefaultPreLoginSourceRate, DefaultPreLoginSourceBurst); err != nil {
		return err
	}
	if err := c.Billing.CheckAndSetDefaults(); err != nil {
		return err
	}
	if err := c.Idle.CheckAndSetDefaults(); err != nil {
		return err
	}
	if err := c.Webhooks.CheckAndSetDefaults(); err != nil {
		return err
	}
	if err := c.Partition.CheckAndSetDefaults(); err != nil {
		return err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Server is a running controld.
type Server struct {
	cfg      Config
	pool     *pgxpool.Pool
	js       jetstream.JetStream
	identity *identity.Service
	apiLimit *userLimiter
	// preLoginLimit and preLoginSourceLimit bound requests without a
	// session, per connection and per client address; refusedLog, the
	// log lines of dropped requests (replyguard.go).
	preLoginLimit, preLoginSourceLimit, refusedLog *userLimiter
	// proofs caches verified reply proofs (replyguard.go).
	proofs  proofCache
	mut     *mutate.Runner
	sem     chan struct{}
	svc     micro.Service
	hosts   *hosts.Service
	cas     *ca.Service
	billing *billing.Runner
	idle    *idle.Runner
	ready   chan struct{}
	// kick wakes the queue loop after a change that may free capacity.
	kick chan struct{}

	payments *payments.Service
	// busAuth answers the auth callout; nil without Config.BusKeys.
	busAuth *busauth.Service
	// serverKey signs session tokens and the trust bundles CLIs pin
	// (ssh.cas): controld's identity.
	serverKey ed25519.PrivateKey
	// httpListener is bound by Run when Config.HTTPAddr is set.
	httpListener net.Listener
	metrics      *metrics
	// obs serves metrics and health; bound by Run when Config.MetricsAddr
	// is set.
	obs *obs.Server
	// apiSubs is how many NATS subscriptions the micro service holds (its
	// endpoints' lanes and its discovery verbs): the drain waits for them
	// to be gone (drain.go).
	apiSubs int
	// entered counts API handlers that started and have not returned,
	// counted before they wait for s.sem.
	entered atomic.Int64
	// gate is whether this replica serves, and its leases (serving.go).
	gate *servingGate
	// registry speaks to Config.Registry (images.Endpoints, images_seed.go).
	registry *registry.Client
}

// New connects to the database, applies migrations and prepares the
// service. Run starts serving.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	// Migrations run as the login role (the schema's owner); everything
	// else as cfg.DatabaseRole.
	if err := store.MigrateURL(ctx, cfg.DatabaseURL); err != nil {
		return nil, err
	}
	pool, err := store.OpenAs(ctx, cfg.DatabaseURL, cfg.MaxConns, cfg.DatabaseRole)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, pool: pool, sem: make(chan struct{}, cfg.MaxInflight),
		ready: make(chan struct{}), kick: make(chan struct{}, 1)}
	if s.registry, err = registry.New(cfg.Registry); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.init(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) init(ctx context.Context) error {
	s.gate = newServingGate(s)
	key, err := loadOrCreateKey(ctx, s.pool, sessionKeyName)
	if err != nil {
		return err
	}
	s.serverKey = key
	if s.identity, err = identity.New(identity.Config{SigningKey: key, Settings: s.cfg.Identity,
		Now: s.cfg.Now, Log: s.cfg.Log}); err != nil {
		return err
	}
	s.apiLimit = newUserLimiter(s.cfg.APIRateLimit, s.cfg.Now)
	s.preLoginLimit = newUserLimiter(s.cfg.PreLoginRateLimit, s.cfg.Now)
	s.preLoginSourceLimit = newUserLimiter(s.cfg.PreLoginSourceRateLimit, s.cfg.Now)
	s.refusedLog = newUserLimiter(RateLimit{Rate: 1, Burst: 1}, s.cfg.Now)
	s.mut = &mutate.Runner{Pool: s.pool, Now: s.now, Log: s.cfg.Log}
	taskKey, err := loadOrCreateKey(ctx, s.pool, taskKeyName)
	if err != nil {
		return err
	}
	if s.cas, err = ca.New(ca.Config{KEK: s.cfg.CAKeyEncryptionKey, Now: s.cfg.Now, Log: s.cfg.Log}); err != nil {
		return err
	}
	if err := s.cas.Init(ctx, s.pool); err != nil {
		return err
	}
	if s.payments, err = payments.New(payments.Config{Settings: s.cfg.Stripe, Pool: s.pool,
		Now: s.cfg.Now, Log: s.cfg.Log}); err != nil {
		return err
	}
	settlers, err := taskSettlers(s.cfg.Hosts)
	if err != nil {
		return err
	}
	s.withJobRetries(settlers)
	if s.hosts, err = hosts.New(hosts.Config{Tuning: s.cfg.Hosts, Pool: s.pool, NATS: s.cfg.NATS, Serve: s.cfg.APINATS,
		ReplyRefused: func(reason string) { s.metrics.repliesRefused.WithLabelValues(reason).Inc() }, TaskKey: taskKey,
		SlotsFreed: s.kickQueue, GPUActive: s.gpuActive, TicketCAKeys: s.ticketCAKeys, Now: s.cfg.Now, Log: s.cfg.Log,
		TaskSettled: func(typ, status string, took time.Duration) { s.metrics.observeTask(typ, status, took) },
		Settlers:    settlers, Nodes: inventoryReports{node.Reports{Pool: s.pool, SlotSubnet: s.cfg.Hosts.SlotSubnet}},
		Faults: faults.Applier{Pool: s.pool, Log: s.cfg.Log}, ProgressEvents: alloc.ProgressEvents}); err != nil {
		return err
	}
	if s.billing, err = s.newBillingRunner(); err != nil {
		return err
	}
	if s.idle, err = s.newIdleRunner(); err != nil {
		return err
	}
	if s.cfg.BusKeys != nil {
		if s.busAuth, err = busauth.New(busauth.Config{NATS: s.cfg.NATS, System: s.cfg.SystemNATS, Keys: s.cfg.BusKeys,
			RecordLinger: s.cfg.BusRecordLinger,
			Pool:         s.pool, Identity: s.identity, Now: s.cfg.Now, Log: s.cfg.Log}); err != nil {
			return err
		}
	}
	s.metrics = newMetrics(s)
	if s.js, err = outbox.NewJetStream(s.cfg.NATS, outbox.DefaultAckTimeout); err != nil {
		return err
	}
	return s.ensureStreams(ctx)
}

func (s *Server) now() time.Time { return s.cfg.Now().UTC() }

// taskSettlers are the settlers of every task type, from the domains that
// enqueue them; hosts only carries them (docs/architecture.md,
// "controld/hosts"). TestEveryTaskTypeHasASettler holds them to hostd's
// handlers.
func taskSettlers(cfg HostsConfig) (tasks.Settlers, error) {
	return tasks.JoinSettlers(alloc.Settlers(faults.ProvisionVerdict), node.Settlers(cfg.AutoApproveSlots),
		jobs.Settlers(jobsConfig), volumes.Settlers(),
		workloads.Settlers(workloads.Config{}))
}

// Pool is controld's database pool (for seeding and tests).
func (s *Server) Pool() *pgxpool.Pool { return s.pool }

// Identity is controld's identity service (for seeding and tests).
func (s *Server) Identity() *identity.Service { return s.identity }

// Ready is closed once the API answers.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Run serves the API and runs the background loops until ctx ends, then
// drains (drain.go): it stops taking requests, releases the singletons,
// lets requests in flight and node results being applied finish within
// Config.DrainTimeout, and closes the pool.
func (s *Server) Run(ctx context.Context) error {
	defer s.pool.Close()
	if s.busAuth != nil {
		// First: nothing else can connect until controld answers.
		if err := s.busAuth.Start(); err != nil {
			return fmt.Errorf("auth callout: %w", err)
		}
		defer s.busAuth.Stop()
	}
	if err := s.registerAPI(); err != nil {
		return err
	}
	if err := s.listenHTTP(); err != nil {
		return errors.Join(err, s.svc.Stop())
	}
	if err := s.listenMetrics(); err != nil {
		return errors.Join(err, s.svc.Stop())
	}
	close(s.ready)
	s.cfg.Log.Info("controld serving", "subjects", "gpuaas.api.v1.>")
	relay, err := outbox.NewRelay(outbox.RelayConfig{Pool: s.pool, JS: s.js, MaxAttempts: s.cfg.OutboxMaxAttempts,
		Now: s.cfg.Now, Log: s.cfg.Log})
	if err != nil {
		return err
	}
	verifier, err := images.NewVerifier(images.VerifierConfig{Pool: s.pool, Now: s.cfg.Now, Log: s.cfg.Log,
		Timeout: s.cfg.ImageVerifyTimeout, Record: images.RecordVerification(s.now),
		Check: func(ctx context.Context, ref string) (images.Check, error) {
			c, err := s.registry.Verify(ctx, ref)
			return images.Check(c), err
		}})
	if err != nil {
		return err
	}
	sender, err := webhooks.NewSender(webhooks.SenderConfig{Settings: s.cfg.Webhooks, Pool: s.pool, Now: s.cfg.Now,
		Log: s.cfg.Log})
	if err != nil {
		return err
	}
	// The metrics server outlives the drain, so it can be watched; its
	// failure stops controld as a loop's does.
	obsCtx, stopObs := context.WithCancel(context.WithoutCancel(ctx))
	obsFailed, obsExited := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(obsExited)
		if err := s.serveMetrics(obsCtx); err != nil {
			obsFailed <- err
		}
	}()
	defer func() { stopObs(); <-obsExited }()

	// Three contexts (drain.go): the singletons stop when ctx ends; the
	// other loops (node reports, fan-out, the callout) once the API has
	// drained; hard, the work in flight, at the drain deadline. A loop
	// that fails stops them all.
	loopsCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	g, gctx := errgroup.WithContext(loopsCtx)
	singCtx, stopSingletons := context.WithCancel(gctx)
	defer context.AfterFunc(ctx, stopSingletons)()
	hard, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	var singletons sync.WaitGroup
	for _, run := range []func(context.Context) error{
		func(ctx context.Context) error {
			return s.supervise(ctx, "outbox relay", s.singleton(lease.OutboxRelay, relay.Run))
		},
		func(ctx context.Context) error {
			return s.supervise(ctx, "billing", s.singleton(lease.BillingAccrual, s.billing.Run))
		},
		func(ctx context.Context) error {
			return s.supervise(ctx, "idle release", s.singleton(lease.IdleEvaluator, s.idle.Run))
		},
		func(ctx context.Context) error {
			return s.supervise(ctx, "node liveness", s.singleton(lease.NodeLiveness, s.nodeLiveness().Run))
		},
	} {
		singletons.Add(1)
		g.Go(func() error { defer singletons.Done(); return run(singCtx) })
	}
	// Every background loop outlives its dependencies' outages (Postgres
	// restarts, NATS servers going away): an error restarts it, never the
	// replica.
	g.Go(func() error {
		return s.supervise(gctx, "event fan-out", func(ctx context.Context) error {
			return outbox.Fanout(ctx, s.js, s.cfg.NATS, s.cfg.Log)
		})
	})
	g.Go(func() error { return s.supervise(gctx, "queue placement", s.queueLoop) })
	g.Go(func() error { return s.supervise(gctx, "job queue", s.runJobQueue) }) // handlers_jobs_queue.go
	g.Go(func() error {
		return s.supervise(gctx, "webhook intake", func(ctx context.Context) error {
			return webhooks.Ingest(ctx, s.pool, s.js, s.cfg.Now, s.cfg.Log, sender.Kick)
		})
	})
	g.Go(func() error { return s.supervise(gctx, "webhook deliveries", sender.Run) })
	g.Go(func() error { return s.supervise(gctx, "image verifier", verifier.Run) })
	g.Go(func() error {
		return s.supervise(gctx, "node service", s.receivingReports(func(ctx context.Context) error { return s.hosts.Run(ctx, hard) }))
	})
	g.Go(func() error { return s.supervise(gctx, "housekeeping", s.housekeeping) })
	g.Go(func() error {
		return s.supervise(gctx, "session revocations", func(ctx context.Context) error {
			return s.identity.RunRevocations(ctx, s.pool)
		})
	})
	g.Go(func() error { return s.serveHTTP(gctx) })
	if s.busAuth != nil {
		g.Go(func() error { return s.supervise(gctx, "nats connection registry", s.busAuth.Run) })
	}
	// Until the drain: a replica that cannot reach Postgres or NATS
	// stops serving (serving.go).
	g.Go(func() error { return s.watchDependencies(singCtx) })
	g.Go(func() error { return s.supervise(gctx, "nats cluster watch", s.watchClusters) })
	var obsErr error
	select {
	case <-ctx.Done():
	case <-gctx.Done(): // a loop failed: the others are stopping
	case obsErr = <-obsFailed:
	}
	s.closeServing()
	err = s.drain(drainSteps{singletons: &singletons, stopLoops: stopLoops, loops: g.Wait, abandon: abandon})
	stopObs()
	<-obsExited
	if obsErr == nil {
		select {
		case obsErr = <-obsFailed:
		default:
		}
	}
	return errors.Join(err, obsErr)
}

// queueLoop places queued requests when capacity may have appeared. It is
// safe on several replicas: each head of queue is claimed with SKIP LOCKED.
func (s *Server) queueLoop(ctx context.Context) error {
	t := time.NewTicker(s.cfg.QueueInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.kick:
		}
		if n, err := alloc.PlaceQueued(ctx, s.pool, s.allocRules(), s.now); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("place queued", "err", err)
		} else if n > 0 {
			s.cfg.Log.Info("placed queued allocations", "count", n)
		}
	}
}

// allocRules are the checks a placement passes besides capacity.
func (s *Server) allocRules() alloc.Rules {
	return alloc.Rules{MinRunway: s.cfg.Billing.MinRunway, TopupsOff: !s.payments.Settings().Enabled()}
}

// IdempotencyRetention is how long a mutation's response stays replayable.
const IdempotencyRetention = 24 * time.Hour

// housekeeping prunes idempotency records past their retention, and what
// identity keeps for a while (exchanged ID tokens, old invites and
// failed-login counts). Safe on every replica: deletes are idempotent.
func (s *Server) housekeeping(ctx context.Context) error {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		if err := mutate.Prune(ctx, s.pool, s.now().Add(-IdempotencyRetention)); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("prune idempotency keys", "err", err)
		}
		if err := s.identity.Prune(ctx, s.pool); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("prune identity", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *Server) kickQueue() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
