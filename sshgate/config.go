package sshgate

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/cmdmode"
)

// Defaults filled in by CheckAndSetDefaults.
const (
	DefaultRefreshInterval = time.Minute
	// DefaultRevocationCheckInterval is how often every open connection's
	// login is re-checked with controld, in case an announcement of its
	// revocation was missed, and to catch logins that expired.
	DefaultRevocationCheckInterval = 30 * time.Second
	// DefaultActivityReportInterval is how often the gateway tells
	// controld which allocations had channel data (idle release).
	DefaultActivityReportInterval = 15 * time.Second
	DefaultDialTimeout            = core.DefaultDialTimeout
	DefaultShutdownGrace          = 10 * time.Second
	DefaultHandshakeTimeout       = 30 * time.Second
	DefaultMaxRecordingBytes      = core.DefaultMaxRecordingBytes
	DefaultName                   = "sshgate"
)

// Node transports: how the gateway reaches a node's terminal server.
const (
	// TransportLink is one TLS 1.3 connection carrying SSH's connection
	// layer (internal/sshlink). The default. (core.TransportLink)
	TransportLink = core.TransportLink
	// TransportSSH is a second SSH connection, for terminal servers that
	// predate links. (core.TransportSSH)
	TransportSSH = core.TransportSSH
)

// CheckNodeTransport fails on a node transport other than TransportLink
// and TransportSSH.
func CheckNodeTransport(t string) error { return core.CheckNodeTransport(t) }

// Config is what a Gateway needs.
type Config struct {
	// Listen is the TCP address to serve SSH on, e.g. ":2222". Required.
	Listen string
	// MetricsAddr is where /healthz, /readyz and /metrics are served
	// (internal/obs; port 0 for any); empty disables them.
	MetricsAddr string
	// HostKeyPath is the gateway's ed25519 host key (OpenSSH PEM). It is
	// generated, mode 0600, when missing. Required unless HostKey is set.
	HostKeyPath string
	// HostKey, when set, is the host key (tests, gpuaas dev); HostKeyPath
	// is then ignored.
	HostKey ed25519.PrivateKey
	// GatewayKey is the gateway's own key: the Ed25519 key of its
	// registered NATS identity (the nkey it connects and logs in to
	// controld with), which controld certifies for nodes' terminal servers
	// (see gateway/core, creds.go). Required.
	GatewayKey ed25519.PrivateKey
	// Principals are the host names users dial; the host certificate names
	// them and OpenSSH checks the name it dialled against them. Default:
	// the host of Advertise, else the host of Listen when it is not a
	// wildcard, else "localhost".
	Principals []string
	// Advertise is the host:port users ssh to, used in messages.
	Advertise string
	// Name identifies this gateway instance in the session index.
	// Default: DefaultName.
	Name string

	// Client talks to controld as the gateway's service principal (role
	// api.RoleGateway). Required. Its NATS connection also carries the
	// recordings to JetStream.
	Client *api.Client

	// Commands serves `ssh gateway <command>`: the gpuaas command tree,
	// built fresh for each session (cli/cmdutil.SSHCommands). Nil turns
	// command mode off.
	Commands cmdmode.Server
	// TUI serves `ssh -t gateway` (a PTY, no command) when command mode is
	// on: the dashboard (cli/cmdutil.SSHDashboard). Nil: such sessions get
	// the command help.
	TUI cmdmode.Server

	// RecordingDir is this gateway instance's spool: recordings wait there
	// until uploaded, and what a crash leaves is uploaded (the sessions
	// marked interrupted) when Run starts again (see spool.go). Empty:
	// recordings are unlinked temporary files in os.TempDir(), which a
	// crash loses.
	RecordingDir string
	// MaxRecordingBytes caps the output recorded per session; output past
	// it still flows and is counted, and the recording says it was cut.
	// Default: DefaultMaxRecordingBytes.
	MaxRecordingBytes int64

	// RefreshInterval is how often the CA keys are re-read (rotation) and
	// the host certificate checked for renewal. Default: DefaultRefreshInterval.
	RefreshInterval time.Duration
	// RevocationCheckInterval is how often the logins of open connections
	// are re-checked (see revoke.go). Default: DefaultRevocationCheckInterval.
	RevocationCheckInterval time.Duration
	// ActivityReportInterval is how often allocation activity is reported
	// to controld (gate.activity; see gateway/core, activity.go). Default:
	// DefaultActivityReportInterval.
	ActivityReportInterval time.Duration
	// DialTimeout bounds dialling a node's terminal server, handshake
	// included. Default: DefaultDialTimeout.
	DialTimeout time.Duration
	// NodeTransport is how nodes' terminal servers are reached:
	// TransportLink or TransportSSH. Both authenticate with the gateway
	// certificate and the one-minute ticket and pin the terminal's host
	// key. Default: TransportLink.
	NodeTransport string
	// HandshakeTimeout bounds a connection's handshake, authentication
	// included, so idle unauthenticated connections do not pile up.
	// Default: DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// ConnLimit bounds each client address's connections (defaults:
	// DefaultConnRate, DefaultConnBurst, DefaultConnMaxOpen; Rate < 0
	// turns it off).
	ConnLimit ConnLimit
	// ShutdownGrace bounds the end of Run once its context ends and the
	// open sessions were told and closed: uploading their recordings and
	// closing their index entries. What is left unfinished then stays in
	// the spool for the next start. Default: DefaultShutdownGrace.
	ShutdownGrace time.Duration

	// HTTPS is the HTTPS front's (https.go); off when HTTPS.Listen is
	// empty.
	HTTPS HTTPS

	// Now is the clock certificates are checked against. Default: time.Now.
	Now func() time.Time
	// Log receives the gateway's logs. Default: discard.
	Log *slog.Logger
}

// CheckAndSetDefaults fails on missing required fields and fills in the
// defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Listen == "" {
		return fmt.Errorf("sshgate config: %w: Listen is required", ErrConfig)
	}
	if c.Client == nil {
		return fmt.Errorf("sshgate config: %w: Client is required", ErrConfig)
	}
	if err := c.ConnLimit.checkAndSetDefaults(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.HostKey == nil && c.HostKeyPath == "" {
		return fmt.Errorf("sshgate config: %w: HostKeyPath or HostKey is required", ErrConfig)
	}
	if c.HostKey != nil && len(c.HostKey) != ed25519.PrivateKeySize {
		return fmt.Errorf("sshgate config: %w: HostKey is not an ed25519 private key", ErrConfig)
	}
	if len(c.GatewayKey) != ed25519.PrivateKeySize {
		return fmt.Errorf("sshgate config: %w: GatewayKey is not an ed25519 private key", ErrConfig)
	}
	if len(c.Principals) == 0 {
		c.Principals = []string{defaultPrincipal(c.Advertise, c.Listen)}
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.MaxRecordingBytes <= 0 {
		c.MaxRecordingBytes = DefaultMaxRecordingBytes
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.RevocationCheckInterval <= 0 {
		c.RevocationCheckInterval = DefaultRevocationCheckInterval
	}
	if c.ActivityReportInterval <= 0 {
		c.ActivityReportInterval = DefaultActivityReportInterval
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.NodeTransport == "" {
		c.NodeTransport = TransportLink
	}
	if err := CheckNodeTransport(c.NodeTransport); err != nil {
		return fmt.Errorf("sshgate config: %w: NodeTransport: %w", ErrConfig, err)
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c.HTTPS.checkAndSetDefaults()
}

// defaultPrincipal is the host name users most likely dial.
func defaultPrincipal(advertise, listen string) string {
	for _, addr := range []string{advertise, listen} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			return host
		}
	}
	return "localhost"
}
