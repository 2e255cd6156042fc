// Package agent is hostd's core: it enrolls the node once, keeps its
// identity, sends heartbeats, and runs the typed tasks controld signs —
// verifying each envelope, running each task id at most once (the seen-set
// survives restarts), reporting progress, and resending results until
// controld acknowledges them.
package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/nodeseal"
	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// Version is reported at enrollment.
const Version = "0.1.0"

// DefaultDrainTimeout is Config.DrainTimeout's default.
const DefaultDrainTimeout = 30 * time.Second

// Config configures an agent.
type Config struct {
	// Server is the NATS URL. Required.
	Server string
	// TLS secures the NATS connection (required for a remote server
	// unless TLS.AllowPlaintext).
	TLS bus.TLS
	// StateDir holds the identity and task records. Required.
	StateDir string
	// Token enrolls the node on first start; ignored once enrolled.
	Token string
	// Env is what the task handlers run against. Required; the agent fills
	// NodeID and NodeName after enrollment.
	Env *tasks.Env
	// Handlers by task type (default tasks.Default()).
	Handlers tasks.Registry
	Hostname string
	// MetricsAddr is where /healthz, /readyz and /metrics are served
	// (internal/obs; port 0 for any); empty disables them.
	MetricsAddr string
	// TerminalAddr is where sshgate reaches this node's terminal server;
	// it is reported at enrollment and in every heartbeat (it may change
	// across restarts).
	TerminalAddr string
	// TerminalHostKey is the terminal server's host key (authorized_keys
	// format), reported so sshgate can check it.
	TerminalHostKey string
	// Terminal, when set, is told the node's id and shape and kept
	// supplied with the ticket CA keys (see casLoop).
	Terminal Terminal
	// CAsInterval is how often the ticket CA keys are refreshed (1m).
	CAsInterval time.Duration
	// Skew tolerated on envelope times (default 30s).
	Skew time.Duration
	// RecordRetention keeps acknowledged task records this long (24h).
	RecordRetention time.Duration
	// DrainTimeout bounds the graceful stop when Run's context ends
	// (SIGTERM): running tasks get this long to finish and their results
	// to reach controld (default DefaultDrainTimeout). A task still running
	// then is left on disk and reported interrupted at the next start.
	DrainTimeout time.Duration
	Now          func() time.Time
	Log          *slog.Logger
	// GPUSampleInterval is how often GPU telemetry is read (nvidia-smi
	// through Env.Runner; DefaultGPUSampleInterval). No sampling when
	// Env.Runner is nil.
	GPUSampleInterval time.Duration
	// GPUActiveThreshold is the utilisation (percent) at or above which a
	// GPU counts as active in heartbeats (DefaultGPUActiveThreshold).
	GPUActiveThreshold float64
	// Guests opens SSH connections into slice VMs to read their GPUs
	// (guestgpus.go); nil: Terminal's when it can (hostd/term.Server
	// does). Slice VMs are not sampled without one, or without
	// Env.Hypervisor and Env.StateDir.
	Guests GuestDialer
	// GuestQueryTimeout bounds one slice VM's GPU read, connecting
	// included (DefaultGuestQueryTimeout).
	GuestQueryTimeout time.Duration
	// LogRing keeps the recent records of Log for `gpuaas node logs`
	// (default: a new ring of DefaultLogRecords / DefaultLogBytes).
	LogRing *LogRing
	// Collectors are more metrics to serve with hostd's own (the node's
	// tenant isolation, say).
	Collectors []prometheus.Collector
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Server == "" || c.StateDir == "" || c.Env == nil {
		return errors.New("hostd: Server, StateDir and Env are required")
	}
	if c.Handlers == nil {
		return errors.New("hostd: Handlers are required")
	}
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
	}
	if c.Skew == 0 {
		c.Skew = 30 * time.Second
	}
	if c.CAsInterval <= 0 {
		c.CAsInterval = time.Minute
	}
	if c.RecordRetention == 0 {
		c.RecordRetention = 24 * time.Hour
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.DrainTimeout < 0 {
		return errors.New("hostd: DrainTimeout must be positive")
	}
	if c.GPUSampleInterval == 0 {
		c.GPUSampleInterval = DefaultGPUSampleInterval
	}
	if c.GPUActiveThreshold == 0 {
		c.GPUActiveThreshold = DefaultGPUActiveThreshold
	}
	if c.GPUSampleInterval < 0 || c.GPUActiveThreshold < 0 || c.GPUActiveThreshold > 100 {
		return errors.New("hostd: GPUSampleInterval must be positive and GPUActiveThreshold a percentage")
	}
	if c.Guests == nil {
		c.Guests, _ = c.Terminal.(GuestDialer)
	}
	if c.GuestQueryTimeout <= 0 {
		c.GuestQueryTimeout = DefaultGuestQueryTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.LogRing == nil {
		c.LogRing = NewLogRing(0, 0)
		c.Log = slog.New(c.LogRing.Handler(c.Log.Handler()))
	}
	if c.Env.Now == nil {
		c.Env.Now = c.Now
	}
	if c.Env.Log == nil {
		c.Env.Log = c.Log
	}
	return nil
}

// Agent is a running hostd.
type Agent struct {
	cfg      Config
	id       *identity
	key      ed25519.PrivateKey
	nc       *nats.Conn
	client   *api.Client
	verifier *signing.Verifier
	seq      *sequencer
	// ctx is the tasks' context: it outlives Run's by the drain.
	ctx context.Context
	// draining is closed when Run's context ends: no task starts after.
	draining     chan struct{}
	drainingOnce sync.Once
	// resend wakes the result sender.
	resend chan struct{}
	// reconnected asks for a pull of pending tasks.
	reconnected chan struct{}
	running     sync.WaitGroup
	// nodeID is set once enrolled; ready is closed once tasks are served.
	nodeID atomic.Value
	ready  chan struct{}

	// mu protects records and stopping (no task is admitted once set).
	mu       sync.Mutex
	records  map[string]*record
	stopping bool

	// faults are the GPU faults not yet acknowledged (faults.go).
	faults faultState

	metrics *agentMetrics
	// gpus is the GPU samplers' state (gpus.go); guestLinks their
	// connections into slice VMs (guestgpus.go).
	gpus       gpuState
	guestLinks guestLinks
	// guestKick asks for a read of the slice VMs now: a task ended, and
	// may have started a VM.
	guestKick chan struct{}
	// obs serves /healthz, /readyz and /metrics when Config.MetricsAddr
	// is set (metrics.go).
	obs *obs.Server
}

// New prepares an agent; Run enrolls if needed and serves.
func New(cfg Config) (*Agent, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	a := &Agent{cfg: cfg, resend: make(chan struct{}, 1), reconnected: make(chan struct{}, 1), guestKick: make(chan struct{}, 1),
		ready: make(chan struct{}), draining: make(chan struct{}),
		faults: faultState{kick: make(chan struct{}, 1), pending: map[faultKey]hostproto.GPUFault{}}}
	if err := a.listenMetrics(); err != nil {
		return nil, err
	}
	return a, nil
}

// NodeID is the enrolled node's id ("" before enrollment). Safe to call
// while Run runs.
func (a *Agent) NodeID() string {
	id, _ := a.nodeID.Load().(string)
	return id
}

// Ready is closed once the agent is enrolled and takes tasks.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Draining is closed once Run's context ended and the agent takes no more
// tasks (drain.go).
func (a *Agent) Draining() <-chan struct{} { return a.draining }

func (a *Agent) now() time.Time { return a.cfg.Now().UTC() }

// Run enrolls (first start), recovers tasks interrupted by a previous
// stop, and serves until ctx ends; then it drains (drain.go): running
// tasks finish and their results reach controld within
// Config.DrainTimeout. Tasks still running then are left unfinished on
// disk; the next start reports them interrupted.
func (a *Agent) Run(ctx context.Context) error {
	taskCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	a.ctx = taskCtx
	defer a.serveMetrics(ctx)()
	if err := a.loadOrEnroll(ctx); err != nil {
		return err
	}
	nc, err := a.connect(a.id.key(), a.id.NodeID, "", nats.ReconnectHandler(func(*nats.Conn) {
		a.kick(a.reconnected)
		a.kick(a.resend)
		a.kick(a.faults.kick)
	}))
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := obs.RegisterNATS(a.metrics.reg, "hostd", nc); err != nil {
		return err
	}
	a.nc, a.client = nc, api.NewClient(nc)
	a.key = a.id.key()
	a.verifier = &signing.Verifier{NodeID: a.id.NodeID, Skew: a.cfg.Skew, Now: a.cfg.Now}
	for _, k := range a.id.TaskKeys {
		a.verifier.Keys = append(a.verifier.Keys, ed25519.PublicKey(k))
	}
	a.cfg.Env.NodeID, a.cfg.Env.NodeName = a.id.NodeID, a.id.Name
	a.cfg.Env.Logs, _ = jetstream.New(nc) // jobs' output to LOGS (hostd/tasks/joblog.go)
	// What controld seals to this node: jobs' secret env (hostd/tasks/jobsecrets.go).
	a.cfg.Env.Sealed, _ = nodeseal.NewOpener(a.id.Seed)
	if a.cfg.Terminal != nil {
		a.cfg.Terminal.SetNode(a.id.NodeID, a.id.Shape)
	}
	if a.records, err = loadRecords(a.cfg.StateDir, a.now(), a.cfg.RecordRetention); err != nil {
		return err
	}
	if a.seq, err = openSequencer(a.cfg.StateDir, a.now()); err != nil {
		return err
	}
	// The fault watch wraps Env's GPU check: before anything reads Env
	// (recovered tasks, the task subscription, workload followers).
	faultLoops := a.startFaultWatch()
	a.recoverInterrupted()
	// Jobs' containers a previous run left: stopped before a task can
	// start one again (hostd/tasks/jobimage_restart.go).
	tasks.StopJobContainers(ctx, a.cfg.Env)
	// Volume mount roots shared, so that copies of volumes follow their
	// unmount (docs/decisions/0066-volume-mount-propagation.md).
	tasks.ShareVolumeRoots(ctx, a.cfg.Env)
	defer tasks.ReleaseVolumeRoots(a.cfg.Env)
	// Workloads' output to LOGS, re-attached (hostd/tasks/workloadlog.go).
	defer tasks.FollowWorkloadLogs(a.cfg.Env)()
	sub, err := hostproto.SubscribeSealed(nc, hostproto.MsgTask, a.id.NodeID, a.onTask)
	if err != nil {
		return fmt.Errorf("subscribe tasks: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	logsSub, err := hostproto.Subscribe(nc, hostproto.MsgLogs, a.id.NodeID, a.onLogs)
	if err != nil {
		return fmt.Errorf("subscribe logs: %w", err)
	}
	defer func() { _ = logsSub.Unsubscribe() }()
	topSub, err := hostproto.Subscribe(nc, hostproto.MsgTop, a.id.NodeID, a.onTop)
	if err != nil {
		return fmt.Errorf("subscribe top: %w", err)
	}
	defer func() { _ = topSub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("subscribe tasks: %w", err)
	}
	a.nodeID.Store(a.id.NodeID)
	close(a.ready)
	a.cfg.Log.Info("hostd serving", "node", a.id.NodeID, "name", a.id.Name)

	// The loops (results, heartbeats, pulls, CAs, GPU telemetry) run through the drain:
	// results must reach controld, and the node must not look dead.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	var loops sync.WaitGroup
	run := append([]func(context.Context){a.resultLoop, a.heartbeatLoop, a.pullLoop}, faultLoops...)
	if a.cfg.Terminal != nil {
		run = append(run, a.casLoop)
	}
	if a.cfg.Env.Runner != nil {
		run = append(run, a.gpuLoop)
	}
	if a.cfg.Guests != nil && a.cfg.Env.Hypervisor != nil && a.cfg.Env.StateDir != "" {
		run = append(run, a.guestGPULoop)
	}
	for _, loop := range run {
		loops.Add(1)
		go func() { defer loops.Done(); loop(loopCtx) }()
	}
	a.kick(a.reconnected) // pull what is pending for us
	a.kick(a.resend)
	<-ctx.Done()
	a.drain(sub, abandon)
	stopLoops()
	loops.Wait()
	return nil
}

func (a *Agent) kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// loadOrEnroll reads the identity, or enrolls with the one-time token.
func (a *Agent) loadOrEnroll(ctx context.Context) error {
	id, err := loadIdentity(a.cfg.StateDir)
	if err != nil {
		return err
	}
	if id != nil {
		a.id = id
		return nil
	}
	if a.cfg.Token == "" {
		return errors.New("this node is not enrolled: pass an enrollment token (`gpuaas node enroll --name NAME` prints one)")
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return fmt.Errorf("generate node key: %w", err)
	}
	// Enrollment has a connection of its own: the token lets the node's
	// new key in to enroll and do nothing else; the node then connects as
	// itself.
	pre, err := bus.KeyFromEd25519Seed(priv.Seed())
	if err != nil {
		return err
	}
	prePub, _ := pre.PublicKey()
	nc, err := a.connect(priv, prePub, a.cfg.Token, nats.MaxReconnects(5))
	if err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	defer nc.Close()
	proof, err := api.ReplyProof(pre)
	if err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	req := hostproto.EnrollRequest{Token: a.cfg.Token, PublicKey: pub, Hostname: a.cfg.Hostname, Version: Version,
		TerminalAddr: a.cfg.TerminalAddr, TerminalHostKey: a.cfg.TerminalHostKey}
	resp, err := a.enrollWhenAnswered(ctx, api.NewClient(nc, api.WithReplyProof(proof)), req)
	if err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	a.id = &identity{NodeID: resp.NodeID, Name: resp.Name, Shape: resp.Shape, Seed: priv.Seed(),
		TaskKeys: resp.TaskKeys, HeartbeatInterval: resp.HeartbeatInterval}
	if err := saveIdentity(a.cfg.StateDir, a.id); err != nil {
		return fmt.Errorf("save identity (the token is spent: ask for a new one): %w", err)
	}
	a.cfg.Log.Info("enrolled", "node", resp.NodeID, "name", resp.Name, "shape", resp.Shape)
	return nil
}

// connect dials NATS with the node's key as its identity (and the
// enrollment token, before enrollment), reading replies on the inbox of
// inboxID (the node id; the key before enrollment).
func (a *Agent) connect(key ed25519.PrivateKey, inboxID, token string, extra ...nats.Option) (*nats.Conn, error) {
	kp, err := bus.KeyFromEd25519Seed(key.Seed())
	if err != nil {
		return nil, err
	}
	tlsOpts, err := a.cfg.TLS.Options(a.cfg.Server)
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{bus.WithKey(kp), nats.CustomInboxPrefix(api.InboxPrefix(inboxID))}, tlsOpts...)
	if token != "" {
		opts = append(opts, nats.Token(token))
	}
	// Logging last: it keeps the handlers extra set.
	opts = append(append(opts, extra...), bus.LogConnection(a.cfg.Log))
	return bus.Connect(a.cfg.Server, "gpuaas-hostd", opts...)
}

// StateDir is where the agent keeps its identity and task records.
func (a *Agent) StateDir() string { return a.cfg.StateDir }
