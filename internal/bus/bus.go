// Package bus runs the embedded NATS server (JetStream on disk) that
// `gpuaas dev` and the tests use, and holds the connection options shared by
// every process that talks to NATS.
package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ErrNotReady is returned when the embedded server does not come up in time.
var ErrNotReady = errors.New("nats server not ready")

// Config configures an embedded NATS server.
type Config struct {
	// Host to listen on; loopback by default.
	Host string
	// Port to listen on; -1 (the default when zero) picks a free port.
	Port int
	// StoreDir holds JetStream data. Required.
	StoreDir string
	// ServerName names the server in cluster and JetStream metadata.
	ServerName string
	// ReadyTimeout bounds the wait for the server to accept connections.
	ReadyTimeout time.Duration
	// Logger receives server start/stop lines.
	Logger *slog.Logger
	// Auth turns on the trust model: accounts, controld's users and the
	// auth callout (see ServerAuth.Config). Without it any client may do
	// anything, which only bus's own tests want.
	Auth *ServerAuth
	// TLS, when CertFile is set, serves TLS to clients.
	TLS ServerTLS
	// Cluster, when Name is set, makes the server one of a cluster
	// (JetStream clustered: streams may have replicas).
	Cluster ClusterConfig
	// MaxStore is what JetStream may keep on disk, which every stream's
	// byte limit is reserved against when the stream is made; 0 leaves
	// nats-server's default (75% of the disk's free space at start).
	MaxStore int64
}

// ClusterConfig joins a server to a cluster through routes.
type ClusterConfig struct {
	// Name of the cluster; every server of it has the same.
	Name string
	// Port the server takes routes on; -1 (the default when zero) picks
	// a free one (see Server.RouteURL).
	Port int
	// Routes are other servers' route URLs (nats-route://host:port);
	// the servers learn the rest of the cluster from each other.
	Routes []string
	// Username and Password are what routes must present (and what this
	// server presents on Routes): a process on the machine that knows
	// neither cannot join the cluster and bypass the clients' auth.
	Username, Password string
}

// ServerTLS is the server side of TLS.
type ServerTLS struct {
	CertFile, KeyFile string
}

// CheckAndSetDefaults validates cfg and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.StoreDir == "" {
		return errors.New("bus: StoreDir is required")
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Port == 0 {
		c.Port = -1
	}
	if c.ServerName == "" {
		c.ServerName = "gpuaas-embedded"
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Server is a running embedded NATS server.
type Server struct {
	ns  *server.Server
	log *slog.Logger
}

// Start starts an embedded NATS server with JetStream and waits until it
// accepts connections.
func Start(cfg Config) (*Server, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	opts, err := serverOptions(cfg)
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(cfg.ReadyTimeout) {
		ns.Shutdown()
		return nil, fmt.Errorf("start nats on %s:%d: %w", cfg.Host, cfg.Port, ErrNotReady)
	}
	cfg.Logger.Info("nats started", "url", ns.ClientURL(), "store", cfg.StoreDir)
	return &Server{ns: ns, log: cfg.Logger}, nil
}

func serverOptions(cfg Config) (*server.Options, error) {
	opts := &server.Options{}
	if cfg.Auth != nil {
		// The same text an operator's nats-server runs with.
		if err := opts.ProcessConfigString(cfg.Auth.Config()); err != nil {
			return nil, fmt.Errorf("nats auth config: %w", err)
		}
	}
	opts.ServerName = cfg.ServerName
	opts.Host = cfg.Host
	opts.Port = cfg.Port
	opts.JetStream = true
	opts.StoreDir = cfg.StoreDir
	if cfg.MaxStore > 0 {
		opts.JetStreamMaxStore = cfg.MaxStore
	}
	opts.NoSigs = true
	opts.NoLog = true
	if err := clusterOptions(opts, cfg); err != nil {
		return nil, err
	}
	// The server notices a client (or route) gone silent as the clients
	// notice their server: its queue subscriptions stop getting requests
	// within seconds, not minutes.
	opts.PingInterval, opts.MaxPingsOut = PingInterval, MaxPingsOut
	opts.MaxPayload = 8 << 20
	opts.JetStreamMaxMemory = 256 << 20
	if cfg.TLS.CertFile != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile})
		if err != nil {
			return nil, fmt.Errorf("nats tls: %w", err)
		}
		opts.TLSConfig = tc
		opts.TLS = true
		opts.TLSTimeout = 2
	}
	return opts, nil
}

func clusterOptions(opts *server.Options, cfg Config) error {
	c := cfg.Cluster
	if c.Name == "" {
		return nil
	}
	opts.Cluster.Name = c.Name
	opts.Cluster.Host = cfg.Host
	opts.Cluster.Port = c.Port
	if opts.Cluster.Port == 0 {
		opts.Cluster.Port = -1
	}
	opts.Cluster.Username, opts.Cluster.Password = c.Username, c.Password
	for _, r := range c.Routes {
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("nats route %q: %w", r, err)
		}
		if c.Username != "" {
			u.User = url.UserPassword(c.Username, c.Password)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return nil
}

// RouteURL is the URL other servers of the cluster route to ("" outside
// a cluster).
func (s *Server) RouteURL() string {
	addr := s.ns.ClusterAddr()
	if addr == nil {
		return ""
	}
	return "nats-route://" + addr.String()
}

// ClientURL is the URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Shutdown stops the server and waits for it to finish.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.log.Info("nats stopped")
}

// PingInterval and MaxPingsOut are how a connection notices that its
// server stopped answering without closing anything (a silent network
// partition, a paused server): after about PingInterval × (MaxPingsOut+1)
// with no PONG it is given up and made again, to another server of the
// pool when one answers. nats.go's defaults (2 minutes, 2) left a
// connection on a cut-off server for minutes.
const (
	PingInterval = 2 * time.Second
	MaxPingsOut  = 2
)

// Connect dials url with the options every gpuaas process shares
// (reconnect forever with jitter, a name for monitoring, pings that notice
// a silent server within seconds), plus extra: the connection's identity
// (WithKey, nats.Token), its inbox prefix and TLS (TLS.Options).
func Connect(url, name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.Timeout(5 * time.Second),
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOut),
	}, extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return nc, nil
}
