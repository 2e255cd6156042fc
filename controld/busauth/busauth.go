// Package busauth is controld's NATS auth callout: every connection to
// the NATS servers except controld's own is decided here. A connection
// proves an identity — a session token (users), an nkey (hostd's enrolled
// node key, a registered gateway or operator key, or an ephemeral key of a
// client that has not logged in yet), an enrollment token — and is let in
// with a user JWT that allows only that identity's subjects and expires
// with its session. busauth also owns bus_identities (the registered
// service keys) and bus_connections (who is connected where, so that a
// revocation closes the connection within seconds).
package busauth

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/bus"
)

// CalloutSubject is where the NATS servers send authorization requests.
const CalloutSubject = "$SYS.REQ.USER.AUTH"

// queueGroup makes every controld replica share the callout.
const queueGroup = "gpuaas-callout"

// Config configures the callout.
type Config struct {
	// NATS is controld's connection in the app account. Required.
	NATS *nats.Conn
	// System is controld's connection in the system account, used to
	// close revoked connections; nil disables closing them (they then
	// last until their authorization expires).
	System *nats.Conn
	// Keys sign and encrypt callout responses. Required.
	Keys *bus.Keys
	// Pool is controld's database. Required.
	Pool *pgxpool.Pool
	// Identity checks session tokens. Required.
	Identity *identity.Service
	// ServiceTTL bounds the authorization of key-based identities (nodes,
	// gateways, operators): they reconnect and are checked again
	// (default 24h).
	ServiceTTL time.Duration
	// PreLoginRate and PreLoginBurst bound new connections without a
	// login per source address and replica (default 1/s, burst 30).
	PreLoginRate  float64
	PreLoginBurst int
	// MaxInflight bounds callouts handled at once (default 64).
	MaxInflight int
	// RecordLinger is how long the connection recorder waits for more
	// connections before writing a batch (default 5ms).
	RecordLinger time.Duration
	Now          func() time.Time
	// ServerNow is the NATS servers' clock, against which the issued
	// JWTs' times are read (default time.Now): a connection's
	// authorization lasts as long as its session has left by Now.
	ServerNow func() time.Time
	Log       *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.NATS == nil || c.Keys == nil || c.Pool == nil || c.Identity == nil {
		return errors.New("busauth: NATS, Keys, Pool and Identity are required")
	}
	if c.ServiceTTL == 0 {
		c.ServiceTTL = 24 * time.Hour
	}
	if c.PreLoginRate == 0 {
		c.PreLoginRate = 1
	}
	if c.PreLoginBurst == 0 {
		c.PreLoginBurst = 30
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = 64
	}
	if c.RecordLinger == 0 {
		c.RecordLinger = 5 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ServerNow == nil {
		c.ServerNow = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Service answers the auth callout.
type Service struct {
	cfg    Config
	issuer string
	sem    chan struct{}
	limits *sourceLimiter
	// rows queues connections to record (runRecorder).
	rows chan connRow
	// wg tracks callouts in flight.
	wg sync.WaitGroup

	// mu protects sub.
	mu  sync.Mutex
	sub *nats.Subscription
}

// New returns a Service; Start subscribes it.
func New(cfg Config) (*Service, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	issuer, err := cfg.Keys.Issuer.PublicKey()
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, issuer: issuer, sem: make(chan struct{}, cfg.MaxInflight),
		limits: newSourceLimiter(cfg.PreLoginRate, cfg.PreLoginBurst), rows: make(chan connRow, 4096)}, nil
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// Start subscribes to the callout subject; connections are decided from
// when it returns.
func (s *Service) Start() error {
	sub, err := s.cfg.NATS.QueueSubscribe(CalloutSubject, queueGroup, s.onRequest)
	if err != nil {
		return err
	}
	if err := s.cfg.NATS.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	s.mu.Lock()
	s.sub = sub
	s.mu.Unlock()
	return nil
}

// Stop stops taking callouts and waits for those in flight.
func (s *Service) Stop() {
	s.mu.Lock()
	if s.sub != nil {
		_ = s.sub.Drain()
		s.sub = nil
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Run keeps the connection registry: it records the connections let in,
// closes the connections of revoked sessions and prunes expired rows,
// until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	// The recorder stops with the registry too: Run returns (to be
	// restarted) when the registry's consumer is gone.
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.runRecorder(ctx) }()
	defer func() { cancel(); <-done }()
	return s.runRegistry(ctx)
}
