package core

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Defaults filled in by CheckAndSetDefaults.
const (
	DefaultDialTimeout     = 10 * time.Second
	DefaultRefreshInterval = time.Minute
	// DefaultMaxRecordingBytes caps the output recorded per session.
	DefaultMaxRecordingBytes = 256 << 20
)

// Node transports: how the gateway reaches a node's terminal server.
const (
	// TransportLink is one TLS 1.3 connection carrying SSH's connection
	// layer (internal/sshlink): no second SSH transport, its encryption
	// and per-packet copies. The default.
	TransportLink = "link"
	// TransportSSH is a second SSH connection, for terminal servers that
	// predate links.
	TransportSSH = "ssh"
)

// CheckNodeTransport fails on a node transport other than TransportLink
// and TransportSSH.
func CheckNodeTransport(t string) error {
	if t != TransportLink && t != TransportSSH {
		return fmt.Errorf("%q is neither %s nor %s", t, TransportLink, TransportSSH)
	}
	return nil
}

// Config is what a Core needs. The fronts fill it from their own config.
type Config struct {
	// Client talks to controld as the gateway's service principal (role
	// api.RoleGateway). Required.
	Client *api.Client
	// GatewayKey is the gateway's own key, which controld certifies for
	// nodes' terminal servers (creds.go). Required.
	GatewayKey ed25519.PrivateKey
	// DialTimeout bounds dialling a node's terminal server, handshake
	// included. Default: DefaultDialTimeout.
	DialTimeout time.Duration
	// NodeTransport is TransportLink (the default) or TransportSSH.
	NodeTransport string
	// RefreshInterval caps the wait between attempts to renew the gateway
	// certificate. Default: DefaultRefreshInterval.
	RefreshInterval time.Duration
	// Name identifies this gateway instance in the session index; the
	// sessions a crash left running are found by it. Default: "sshgate".
	Name string
	// RecordingDir is this gateway instance's recording spool (spool.go);
	// empty: recordings are unlinked temporary files a crash loses.
	RecordingDir string
	// MaxRecordingBytes caps the output recorded per session. Default:
	// DefaultMaxRecordingBytes.
	MaxRecordingBytes int64
	// Now is the clock certificates are checked against. Default: time.Now.
	Now func() time.Time
	// Log receives the core's logs. Default: discard.
	Log *slog.Logger
}

// CheckAndSetDefaults fails on missing required fields and fills in the
// defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Client == nil {
		return fmt.Errorf("gateway core config: %w: Client is required", ErrConfig)
	}
	if len(c.GatewayKey) != ed25519.PrivateKeySize {
		return fmt.Errorf("gateway core config: %w: GatewayKey is not an ed25519 private key", ErrConfig)
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.NodeTransport == "" {
		c.NodeTransport = TransportLink
	}
	if err := CheckNodeTransport(c.NodeTransport); err != nil {
		return fmt.Errorf("gateway core config: %w: NodeTransport: %w", ErrConfig, err)
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.Name == "" {
		c.Name = "sshgate"
	}
	if c.MaxRecordingBytes <= 0 {
		c.MaxRecordingBytes = DefaultMaxRecordingBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Core is what every front of the gateway shares: the CA keys it trusts,
// its own credential towards nodes, and the dialer that authorizes a user
// for an allocation and reaches the node over the gateway link. It knows
// nothing of the protocol a front speaks to users. Safe for concurrent use.
type Core struct {
	cfg   Config
	log   *slog.Logger
	trust trust
	creds *gatewayCreds
	// activity tracks each allocation's sessions and streams, for idle
	// release and notices (activity.go).
	activity activity
	// logins indexes the fronts' open connections by login, for
	// revocation (revoke.go).
	logins logins
	// links pools the links OpenPort's streams are channels of
	// (linkpool.go).
	links linkPool

	// mu protects recordings.
	mu         sync.Mutex
	recordings jetstream.JetStream // set by OpenRecordings (index.go)
}

// New checks cfg and returns a Core. Nothing is dialled until asked.
func New(cfg Config) (*Core, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	creds, err := newGatewayCreds(cfg.GatewayKey)
	if err != nil {
		return nil, err
	}
	return &Core{cfg: cfg, log: cfg.Log, creds: creds}, nil
}

// Transport is the node transport the core dials with.
func (c *Core) Transport() string { return c.cfg.NodeTransport }

// RefreshTrust reads the CA keys from controld and makes them current;
// on failure the previous ones stay.
func (c *Core) RefreshTrust(ctx context.Context) (*TrustSet, error) {
	ts, err := FetchTrust(ctx, c.cfg.Client)
	if err != nil {
		return nil, err
	}
	c.trust.cur.Store(ts)
	return ts, nil
}

// Trust is the current reading of controld's CA keys, nil before the
// first RefreshTrust.
func (c *Core) Trust() *TrustSet { return c.trust.get() }

// SubscribeTimeout bounds registering a NATS subscription (notices,
// revocations) before serving.
const SubscribeTimeout = 10 * time.Second
