package sshgate

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// Revocation is the core's (gateway/core, revoke.go): it watches
// controld's announcements and re-checks open logins. Here each
// authenticated connection registers as a core.Login (loginConn), and a
// login that ended ends its connection: each open session is told why on
// its stderr and exits, then the connection is closed, which takes its
// port forwards and its link to the node with it. At connect controld
// refuses an ended login itself: gate.authorize for allocations,
// gate.user_token and gate.sessions (confirmLogin) for command mode.

// Timings of ending a connection.
const (
	// notifyTimeout bounds telling a connection's sessions why they end
	// (a client that does not read must not hold the connection open).
	notifyTimeout = time.Second
	// closeGrace is how long a notified client gets to hang up by itself
	// (OpenSSH does once its last session closed) before the gateway
	// closes the connection under it.
	closeGrace = time.Second
)

// loginKey is the context key of a connection's *loginConn.
type loginKey struct{}

// loginConn is one authenticated client connection, as revocation sees it.
type loginConn struct {
	sessionID string
	userID    string
	cert      string // the certificate that authenticated, authorized_keys format
	conn      *trackedConn
	done      <-chan struct{} // closed when the connection ends
	end       func(reason string)

	// mu protects the following.
	mu        sync.Mutex
	sessions  map[ssh.Session]*sync.Mutex // open session channels, each with its endWrite lock
	confirmed bool                        // controld said the login is live
	ended     string                      // why it ended ("" while live)
}

// Ref implements core.Login.
func (lc *loginConn) Ref() gateproto.GateSession {
	return gateproto.GateSession{SessionID: lc.sessionID, UserID: lc.userID}
}

// End implements core.Login: the connection ends in the background.
func (lc *loginConn) End(reason string) { lc.end(reason) }

// loginOf returns the connection's login, nil when it has none.
func loginOf(ctx ssh.Context) *loginConn {
	lc, _ := ctx.Value(loginKey{}).(*loginConn)
	return lc
}

func (lc *loginConn) endedReason() string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.ended
}

// addSession notes an open session; false when the login has ended.
func (lc *loginConn) addSession(s ssh.Session) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.ended != "" {
		return false
	}
	lc.sessions[s] = new(sync.Mutex)
	return true
}

// endWrite runs f — a write that ends the session's output (telling it why
// it ends, half-closing it) — never alongside another: x/crypto's channel
// reads its sent-EOF flag unlocked on every write and sets it in
// CloseWrite, so endConn's last words and the relay's CloseWrite must not
// overlap (the race detector caught them doing so on a gateway shutdown).
func (lc *loginConn) endWrite(s ssh.Session, f func()) {
	lc.mu.Lock()
	mu := lc.sessions[s]
	lc.mu.Unlock()
	if mu == nil {
		f()
		return
	}
	mu.Lock()
	defer mu.Unlock()
	f()
}

func (lc *loginConn) removeSession(s ssh.Session) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	delete(lc.sessions, s)
}

// markEnded records why the login ended and returns its open sessions;
// false when it had already ended.
func (lc *loginConn) markEnded(reason string) (map[ssh.Session]*sync.Mutex, bool) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.ended != "" {
		return nil, false
	}
	lc.ended = reason
	out := make(map[ssh.Session]*sync.Mutex, len(lc.sessions))
	for s, mu := range lc.sessions {
		out[s] = mu
	}
	return out, true
}

// trackLogin registers an authenticated connection under the login its
// certificate names, until the connection ends. Called once the key that
// signed is confirmed (serverConfig).
func (g *Gateway) trackLogin(ctx ssh.Context, key gossh.PublicKey, perms *gossh.Permissions) {
	v, err := sshcert.VerifiedFrom(perms)
	if err != nil || v.User == nil || v.User.SessionID == "" {
		return // identityOf refuses every session of such a connection
	}
	st, ok := ctx.Value(connStateKey{}).(*connState)
	if !ok {
		return
	}
	lc := &loginConn{sessionID: v.User.SessionID, userID: v.User.UserID, conn: st.conn, done: ctx.Done(),
		cert: strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key))), sessions: map[ssh.Session]*sync.Mutex{}}
	lc.end = func(reason string) {
		g.bg.add()
		go func() {
			defer g.bg.done()
			g.endLogin(lc, reason)
		}()
	}
	ctx.SetValue(loginKey{}, lc)
	// Removed when the connection ends, without a goroutine waiting for
	// it meanwhile (BenchmarkIdleSessions).
	context.AfterFunc(ctx, g.core.AddLogin(lc))
}

// errLoginEnded is what a session of an ended login is told.
func errLoginEnded(reason string) error {
	if reason == gateproto.SessionEndedExpired {
		return errors.New("your login has expired; run `gpuaas login`")
	}
	return errors.New("your login was ended (logged out / disabled); run `gpuaas login`")
}

// confirmLogin asks controld, once per connection, whether the login the
// certificate names is live. Paths that call gate.authorize or
// gate.user_token have controld check it there too; this covers command
// mode before anything runs (help, a client's own token, the dashboard).
// It fails closed: a login that cannot be checked serves nothing.
func (g *Gateway) confirmLogin(ctx ssh.Context, id sshcert.Identity) error {
	lc := loginOf(ctx)
	if lc == nil {
		return ErrNoIdentity
	}
	lc.mu.Lock()
	confirmed, ended := lc.confirmed, lc.ended
	lc.mu.Unlock()
	switch {
	case ended != "":
		return errLoginEnded(ended)
	case confirmed:
		return nil
	}
	reason, err := g.core.LoginEnded(ctx, gateproto.GateSession{SessionID: id.SessionID, UserID: id.UserID})
	if err != nil {
		g.log.Warn("cannot check a login; refusing the session", "user", id.UserID, "session", id.SessionID, "err", err)
		return errors.New("cannot check your login right now; try again")
	}
	if reason != "" {
		g.log.Info("login ended; refusing the session", "user", id.UserID, "session", id.SessionID, "reason", reason)
		return errLoginEnded(reason)
	}
	lc.mu.Lock()
	lc.confirmed = true
	lc.mu.Unlock()
	return nil
}

// reasonShutdown marks the connections the gateway ended as it shut down.
const reasonShutdown = "gateway_shutdown"

// endLogin ends a connection whose login ended.
func (g *Gateway) endLogin(lc *loginConn, reason string) {
	g.endConn(lc, reason, errLoginEnded(reason))
}

// endConn ends a connection: every open session is told why (on stderr,
// which a terminal shows too) and exits, the client gets a moment to hang
// up, then the connection is closed.
func (g *Gateway) endConn(lc *loginConn, reason string, why error) {
	sessions, first := lc.markEnded(reason)
	if !first {
		return
	}
	g.log.Info("ending a connection", "user", lc.userID, "session", lc.sessionID,
		"reason", reason, "open_sessions", len(sessions), "remote", lc.conn.RemoteAddr())
	msg := "\r\ngpuaas gateway: " + why.Error() + "\r\n"
	var wg sync.WaitGroup
	for s, mu := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			_, _ = io.WriteString(s.Stderr(), msg)
			mu.Unlock()
			_ = s.Exit(exitGatewayError)
		}()
	}
	start := time.Now()
	notified := make(chan struct{})
	go func() { wg.Wait(); close(notified) }()
	select {
	case <-notified:
	case <-time.After(notifyTimeout):
		g.log.Warn("sessions of an ended connection not told in time; closing anyway", "session", lc.sessionID)
	}
	hungUp := len(sessions) == 0
	if !hungUp {
		select {
		case <-lc.done:
			hungUp = true
		case <-time.After(closeGrace):
		}
	}
	_ = lc.conn.Close()
	g.log.Info("closed the connection", "session", lc.sessionID, "reason", reason, "client_hung_up", hungUp,
		"took", time.Since(start).Round(time.Millisecond))
}

// presentedCert is the certificate the connection authenticated with, in
// authorized_keys format, for controld to verify (gate.authorize); empty
// when the connection has no login.
func presentedCert(ctx context.Context) string {
	sctx, ok := ctx.(ssh.Context)
	if !ok {
		return ""
	}
	if lc := loginOf(sctx); lc != nil {
		return lc.cert
	}
	return ""
}
