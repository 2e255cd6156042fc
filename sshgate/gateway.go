package sshgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/ssh"
	"github.com/charmbracelet/wish"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// Gateway is the SSH gateway. Build it with New, serve with Run.
type Gateway struct {
	cfg Config
	log *slog.Logger
	// core is what the fronts share: CA keys, the gateway credential, the
	// dialer to nodes (gateway/core).
	core  *core.Core
	ready chan struct{}

	// ptys holds the PTY request of each session that has one, from
	// pty-req until the session's channel closes (see ptyHandler).
	ptys sync.Map // ssh.Session → ssh.Pty

	// conns counts client connections, for shutdown. (The library's own
	// Shutdown races a handshake that completes meanwhile.)
	conns tracker
	// bg counts sessions and the work that outlives them: uploading a
	// recording and closing its index entry. Run waits for it before
	// returning.
	bg tracker
	// stopping is set once Run shuts down: new sessions are refused.
	stopping atomic.Bool

	// mu protects the following.
	mu       sync.Mutex
	srv      *ssh.Server
	addr     net.Addr
	hostCert *hostCert

	metrics *gateMetrics
	https   httpsFront // the HTTPS front, when configured (https.go)
	// obs serves /healthz, /readyz and /metrics when Config.MetricsAddr
	// is set (metrics.go).
	obs *obs.Server
}

// New checks cfg and returns a Gateway. Nothing is dialled or read until
// Run.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, log: cfg.Log.With("component", "sshgate"), ready: make(chan struct{})}
	var err error
	if g.core, err = core.New(core.Config{Client: cfg.Client, GatewayKey: cfg.GatewayKey, DialTimeout: cfg.DialTimeout,
		NodeTransport: cfg.NodeTransport, RefreshInterval: cfg.RefreshInterval, Name: cfg.Name, RecordingDir: cfg.RecordingDir,
		MaxRecordingBytes: cfg.MaxRecordingBytes, Now: cfg.Now, Log: g.log}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := g.listenMetrics(); err != nil {
		return nil, err
	}
	return g, nil
}

// Ready is closed once Run serves.
func (g *Gateway) Ready() <-chan struct{} { return g.ready }

// Addr is the address Run listens on, nil before Ready.
func (g *Gateway) Addr() net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addr
}

// Run loads the host key, fetches the CA keys and the host certificate
// from controld, makes sure the recordings bucket exists, ends as
// interrupted what its last run left running (spool.go), and serves SSH
// until ctx ends. It then shuts down (see shutdown) and returns.
func (g *Gateway) Run(ctx context.Context) error {
	return g.run(ctx, nil)
}

// RunOn is Run serving on ln, which it closes when it returns, instead of
// listening on Config.Listen once it has its certificates. A caller that
// must publish the address before the gateway starts (devenv tells
// controld) holds the port from the start this way: released and taken
// again later, any process may bind it in between.
func (g *Gateway) RunOn(ctx context.Context, ln net.Listener) error {
	return g.run(ctx, ln)
}

func (g *Gateway) run(ctx context.Context, ln net.Listener) error {
	defer g.serveMetrics(ctx)()
	if ln != nil {
		// Closed also when Run fails before serving on it (a second
		// close, after shutdown's, does nothing).
		defer func() { _ = ln.Close() }()
	}
	hostKey := g.cfg.HostKey
	if hostKey == nil {
		var err error
		if hostKey, err = loadOrCreateHostKey(g.cfg.HostKeyPath); err != nil {
			return err
		}
	}
	hostSigner, err := gossh.NewSignerFromKey(hostKey)
	if err != nil {
		return fmt.Errorf("host key: %w", err)
	}
	if _, err := g.core.RefreshTrust(ctx); err != nil {
		return err
	}
	hc, err := requestHostCert(ctx, g.cfg.Client, hostSigner, g.cfg.Principals)
	if err != nil {
		return err
	}
	if err := g.core.OpenRecordings(); err != nil {
		return err
	}
	g.core.RecoverInterrupted(ctx)
	// Without a gateway certificate the gateway still serves (commands,
	// the TUI) but opens no shell; the core's KeepGatewayCert keeps trying.
	if err := g.core.RenewGatewayCert(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g.core.LogCredsError(err)
	}
	srv, err := g.newServer(hostSigner, hc.signer)
	if err != nil {
		return err
	}
	// Listening for revocations before serving: no connection can
	// authenticate before the gateway would hear that its login ended.
	stopRevocations, err := g.core.WatchRevocations(ctx, g.cfg.RevocationCheckInterval)
	if err != nil {
		return err
	}
	defer stopRevocations()
	stopNotices, err := g.core.WatchNotices()
	if err != nil {
		return err
	}
	defer stopNotices()
	if ln == nil {
		if ln, err = net.Listen("tcp", g.cfg.Listen); err != nil {
			return fmt.Errorf("listen %s: %w", g.cfg.Listen, err)
		}
	}
	stopHTTPS, err := g.serveHTTPS(ctx)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer stopHTTPS()
	g.mu.Lock()
	g.srv, g.addr, g.hostCert = srv, ln.Addr(), hc
	g.mu.Unlock()

	g.log.Info("serving ssh", "addr", ln.Addr().String(), "principals", g.cfg.Principals,
		"host_key", gossh.FingerprintSHA256(hostSigner.PublicKey()), "cert_valid_before", time.Unix(int64(hc.cert.ValidBefore), 0).UTC())
	close(g.ready)

	refreshCtx, stopRefresh := context.WithCancel(ctx)
	defer stopRefresh()
	go g.refreshLoop(refreshCtx, hostSigner)
	go g.core.KeepGatewayCert(refreshCtx)
	reported := make(chan struct{})
	go func() { defer close(reported); g.core.ReportActivity(refreshCtx, g.cfg.ActivityReportInterval) }()
	defer func() { stopRefresh(); <-reported }()

	served := make(chan error, 1)
	limited := newLimitedListener(ln, g.cfg.ConnLimit, g.cfg.Now, g.metrics.connsRefused, g.log)
	go func() { served <- srv.Serve(limited) }()
	select {
	case err := <-served:
		_ = srv.Close()
		_ = g.bg.wait(context.Background())
		return fmt.Errorf("serve ssh: %w", err)
	case <-ctx.Done():
	}
	g.shutdown(ln, served, srv)
	return nil
}

// errShuttingDown is what open and new sessions are told as Run stops.
var errShuttingDown = errors.New("gateway shutting down; this session ends here (its recording is kept): reconnect in a moment")

// shutdown stops the gateway in the order that loses nothing: no new
// connections; every open session is told why it ends (on its stderr) and
// exits with exitGatewayError, and its connection is closed; the sessions'
// recordings are uploaded and their index entries closed, for at most
// ShutdownGrace (what is left stays in the spool for the next start).
func (g *Gateway) shutdown(ln net.Listener, served <-chan error, srv *ssh.Server) {
	start := time.Now()
	g.stopping.Store(true)
	_ = ln.Close()
	<-served
	open := g.core.Logins()
	g.log.Info("shutting down: telling open connections", "connections", len(open))
	var ends sync.WaitGroup
	for _, l := range open {
		lc, ok := l.(*loginConn) // this front's core holds only its own
		if !ok {
			continue
		}
		ends.Add(1)
		go func() {
			defer ends.Done()
			g.endConn(lc, reasonShutdown, errShuttingDown)
		}()
	}
	ends.Wait()
	// Connections still in their handshake, or without a login.
	_ = srv.Close()
	graceCtx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownGrace)
	defer cancel()
	if err := g.conns.wait(graceCtx); err != nil {
		g.log.Warn("connections still open after closing them")
	}
	if err := g.bg.wait(graceCtx); err != nil {
		g.log.Warn("recordings or index entries not finished in the grace period; the next start recovers them",
			"grace", g.cfg.ShutdownGrace)
	}
	g.log.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
}

// newServer builds the wish server. Everything a connection can do is
// decided here: the one authentication method, the session middleware
// chain, the one subsystem, the two channel types, and the one kind of
// global request (remote forwarding, remote.go).
func (g *Gateway) newServer(hostKey, hostCert gossh.Signer) (*ssh.Server, error) {
	return wish.NewServer(
		wish.WithVersion("gpuaas-sshgate"),
		func(s *ssh.Server) error {
			// Both: OpenSSH with the @cert-authority line for this host asks
			// for the certificate; a client without it still gets a key.
			s.AddHostKey(hostCert)
			s.AddHostKey(hostKey)
			return nil
		},
		// Only user certificates: no PasswordHandler, no
		// KeyboardInteractiveHandler, and NoClientAuth stays false.
		wish.WithPublicKeyAuth(g.publicKeyHandler),
		func(s *ssh.Server) error {
			s.ServerConfigCallback = g.serverConfig
			s.ConnCallback = g.connCallback
			s.PtyCallback = g.ptyCallback
			s.PtyHandler = g.ptyHandler
			s.ConnectionFailedCallback = func(conn net.Conn, err error) {
				g.log.Debug("connection failed", "remote", conn.RemoteAddr(), "err", err)
			}
			s.Handler = g.sessionHandler()
			s.SubsystemHandlers = map[string]ssh.SubsystemHandler{"sftp": ssh.SubsystemHandler(g.sessionHandler())}
			s.ChannelHandlers = map[string]ssh.ChannelHandler{
				"session":      ssh.DefaultSessionHandler,
				"direct-tcpip": g.directTCPIP,
			}
			// Remote forwarding only: every other global request
			// (streamlocal, keepalives) is answered false.
			s.RequestHandlers = map[string]ssh.RequestHandler{
				sshwire.ForwardRequest:       g.tcpipForward,
				sshwire.CancelForwardRequest: g.tcpipForward,
			}
			return nil
		},
	)
}

// refreshLoop re-reads the CA keys (so a rotation reaches the gateway
// without a restart) and renews the host certificate when it is due.
func (g *Gateway) refreshLoop(ctx context.Context, hostKey gossh.Signer) {
	t := time.NewTicker(g.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.refresh(ctx, hostKey)
	}
}

func (g *Gateway) refresh(ctx context.Context, hostKey gossh.Signer) {
	ts, err := g.core.RefreshTrust(ctx)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			g.log.Warn("refresh CA keys; keeping the previous ones", "err", err)
		}
		return
	}

	g.mu.Lock()
	hc, srv := g.hostCert, g.srv
	g.mu.Unlock()
	if !hc.due(g.cfg.Now(), ts.Host) {
		return
	}
	renewed, err := requestHostCert(ctx, g.cfg.Client, hostKey, g.cfg.Principals)
	if err != nil {
		g.log.Warn("renew host certificate", "err", err, "valid_before", time.Unix(int64(hc.cert.ValidBefore), 0).UTC())
		return
	}
	// AddHostKey replaces the signer of the same type: the old certificate.
	srv.AddHostKey(renewed.signer)
	g.mu.Lock()
	g.hostCert = renewed
	g.mu.Unlock()
	g.log.Info("renewed host certificate", "valid_before", time.Unix(int64(renewed.cert.ValidBefore), 0).UTC())
}

// connCallback counts the connection and gives it its state, released
// (with the link to the node, if any) when the client's connection ends.
func (g *Gateway) connCallback(ctx ssh.Context, conn net.Conn) net.Conn {
	// The handshake deadline holds until authentication succeeds
	// (serverConfig lifts it).
	tc := newTrackedConn(conn, &g.conns, time.Now().Add(g.cfg.HandshakeTimeout))
	st := &connState{conn: tc}
	ctx.SetValue(connStateKey{}, st)
	// No goroutine waits for the end: a connection's footprint matters
	// (BenchmarkIdleSessions).
	context.AfterFunc(ctx, st.close)
	return tc
}

// ptyHandler notes the PTY request for the session instead of allocating
// or emulating a PTY: the node allocates the real one. (The library's
// default emulation rewrites "\n" to "\r\n" in everything the session
// writes, which would corrupt the proxied byte stream.) The returned func
// runs when the session's channel closes.
func (g *Gateway) ptyHandler(_ ssh.Context, s ssh.Session, pty ssh.Pty) (func() error, error) {
	g.ptys.Store(s, pty)
	return func() error {
		g.ptys.Delete(s)
		return nil
	}, nil
}

// ptyOf returns the session's PTY request, if it made one.
func (g *Gateway) ptyOf(s ssh.Session) (ssh.Pty, bool) {
	v, ok := g.ptys.Load(s)
	if !ok {
		return ssh.Pty{}, false
	}
	return v.(ssh.Pty), true
}
