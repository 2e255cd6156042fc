package sshgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/ssh"
	"github.com/nats-io/nats.go"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// Revocation. A user certificate names the login session it was minted
// under (sshcert.ExtensionSessionID); when that session ends — logout, an
// administrator disabling the user, expiry — the certificate stops
// working here:
//
//   - at connect, controld refuses it: gate.authorize for allocations,
//     gate.user_token and gate.sessions (confirmLogin) for command mode;
//   - open connections are tracked by login (logins); controld announces
//     revocations on api.GateRevokedSubject, and every open connection of
//     a revoked login is ended within moments: each open session is told
//     why on its stderr and exits, then the connection is closed, which
//     takes its port forwards and its link to the node with it;
//   - a missed announcement (the gateway was reconnecting to NATS) and
//     expiry, which is never announced, are caught by a batched re-check
//     of every open login each RevocationCheckInterval and right after a
//     NATS reconnect.
//
// An announcement is only a hint: the gateway ends what controld confirms
// has ended (gate.sessions), so a forged message cannot cut anyone off.

// Timings of ending a connection.
const (
	// notifyTimeout bounds telling a connection's sessions why they end
	// (a client that does not read must not hold the connection open).
	notifyTimeout = time.Second
	// closeGrace is how long a notified client gets to hang up by itself
	// (OpenSSH does once its last session closed) before the gateway
	// closes the connection under it.
	closeGrace = time.Second
	// reconnectPoll is how often the NATS connection is looked at for a
	// reconnect, after which every open login is re-checked at once.
	reconnectPoll = time.Second
	// subscribeTimeout bounds registering the revocation subscription.
	subscribeTimeout = 10 * time.Second
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

	// mu protects the following.
	mu        sync.Mutex
	sessions  map[ssh.Session]*sync.Mutex // open session channels, each with its endWrite lock
	confirmed bool                        // controld said the login is live
	ended     string                      // why it ended ("" while live)
}

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

// logins indexes the open connections by login session.
type logins struct {
	// mu protects bySession.
	mu        sync.Mutex
	bySession map[string]map[*loginConn]struct{}
}

func (l *logins) add(lc *loginConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bySession == nil {
		l.bySession = map[string]map[*loginConn]struct{}{}
	}
	set := l.bySession[lc.sessionID]
	if set == nil {
		set = map[*loginConn]struct{}{}
		l.bySession[lc.sessionID] = set
	}
	set[lc] = struct{}{}
}

func (l *logins) remove(lc *loginConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.bySession[lc.sessionID]
	delete(set, lc)
	if len(set) == 0 {
		delete(l.bySession, lc.sessionID)
	}
}

// refs returns the distinct (session, user) pairs of the open connections,
// only those of sessionIDs when it is not nil.
func (l *logins) refs(sessionIDs []string) []api.GateSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []api.GateSession
	seen := map[api.GateSession]bool{}
	collect := func(set map[*loginConn]struct{}) {
		for lc := range set {
			ref := api.GateSession{SessionID: lc.sessionID, UserID: lc.userID}
			if !seen[ref] {
				seen[ref] = true
				out = append(out, ref)
			}
		}
	}
	if sessionIDs == nil {
		for _, set := range l.bySession {
			collect(set)
		}
		return out
	}
	for _, sid := range sessionIDs {
		collect(l.bySession[sid])
	}
	return out
}

// all returns every open connection.
func (l *logins) all() []*loginConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*loginConn
	for _, set := range l.bySession {
		for lc := range set {
			out = append(out, lc)
		}
	}
	return out
}

// matching returns the open connections of a session and user.
func (l *logins) matching(ref api.GateSession) []*loginConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*loginConn
	for lc := range l.bySession[ref.SessionID] {
		if lc.userID == ref.UserID {
			out = append(out, lc)
		}
	}
	return out
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
	ctx.SetValue(loginKey{}, lc)
	g.logins.add(lc)
	go func() {
		<-ctx.Done()
		g.logins.remove(lc)
	}()
}

// errLoginEnded is what a session of an ended login is told.
func errLoginEnded(reason string) error {
	if reason == api.SessionEndedExpired {
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
	resp, err := g.cfg.Client.GateSessions(ctx, api.GateSessionsRequest{Sessions: []api.GateSession{
		{SessionID: id.SessionID, UserID: id.UserID}}})
	if err != nil {
		g.log.Warn("cannot check a login; refusing the session", "user", id.UserID, "session", id.SessionID, "err", err)
		return errors.New("cannot check your login right now; try again")
	}
	if len(resp.Ended) > 0 {
		g.log.Info("login ended; refusing the session", "user", id.UserID, "session", id.SessionID, "reason", resp.Ended[0].Reason)
		return errLoginEnded(resp.Ended[0].Reason)
	}
	lc.mu.Lock()
	lc.confirmed = true
	lc.mu.Unlock()
	return nil
}

// watchRevocations subscribes to controld's revocation announcements and
// re-checks the open logins until ctx ends. The subscription is in place
// when it returns.
func (g *Gateway) watchRevocations(ctx context.Context) (stop func(), err error) {
	nc := g.cfg.Client.Conn()
	hints := make(chan []string, 64)
	sub, err := nc.Subscribe(api.GateRevokedSubject, func(m *nats.Msg) {
		var r api.SessionRevoked
		if err := json.Unmarshal(m.Data, &r); err != nil || len(r.SessionIDs) == 0 {
			g.log.Warn("undecodable revocation announcement", "err", err)
			return
		}
		select {
		case hints <- r.SessionIDs:
		default:
			// The loop is behind: a full re-check covers everything.
			select {
			case hints <- nil:
			default:
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", api.GateRevokedSubject, err)
	}
	if err := nc.FlushTimeout(subscribeTimeout); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe %s: %w", api.GateRevokedSubject, err)
	}
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.revocationLoop(loopCtx, nc, hints)
	}()
	return func() {
		_ = sub.Unsubscribe()
		cancel()
		<-done
	}, nil
}

// revocationLoop checks the logins an announcement names as it arrives,
// and every open login each RevocationCheckInterval and after a NATS
// reconnect (announcements sent while disconnected are lost).
func (g *Gateway) revocationLoop(ctx context.Context, nc *nats.Conn, hints <-chan []string) {
	every := time.NewTicker(g.cfg.RevocationCheckInterval)
	defer every.Stop()
	poll := time.NewTicker(reconnectPoll)
	defer poll.Stop()
	reconnects := nc.Stats().Reconnects
	for {
		var only []string // nil: every open login
		select {
		case <-ctx.Done():
			return
		case only = <-hints:
		case <-every.C:
		case <-poll.C:
			n := nc.Stats().Reconnects
			if n == reconnects {
				continue
			}
			reconnects = n
			g.log.Info("reconnected to NATS; re-checking open logins")
		}
		g.checkLogins(ctx, only)
	}
}

// checkLogins asks controld about the open logins (those of sessionIDs,
// or all when nil), in batches, and ends the connections of those that
// ended.
func (g *Gateway) checkLogins(ctx context.Context, sessionIDs []string) {
	refs := g.logins.refs(sessionIDs)
	for len(refs) > 0 {
		batch := refs[:min(len(refs), api.MaxGateSessions)]
		refs = refs[len(batch):]
		resp, err := g.cfg.Client.GateSessions(ctx, api.GateSessionsRequest{Sessions: batch})
		if err != nil {
			if ctx.Err() == nil {
				g.log.Warn("check open logins; retrying at the next check", "logins", len(batch), "err", err)
			}
			return
		}
		for _, e := range resp.Ended {
			for _, lc := range g.logins.matching(e.GateSession) {
				g.bg.add()
				go func() {
					defer g.bg.done()
					g.endLogin(lc, e.Reason)
				}()
			}
		}
	}
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
