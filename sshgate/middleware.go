package sshgate

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/charmbracelet/ssh"
	"github.com/charmbracelet/wish"
	"github.com/charmbracelet/wish/recover"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/corrid"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
)

// exitGatewayError is the exit status of a session the gateway could not
// serve (the allocation refused, the node unreachable): 255, what OpenSSH's
// ssh exits with when the failure is its own rather than the command's.
const exitGatewayError = 255

// CommandUser is the SSH user name of command mode that messages and the
// generated ssh_config use (`ssh gpuaas@gateway alloc list`). Any user
// name that is not an allocation id gets command mode (or the dashboard)
// as the certificate's user, so `ssh gateway` works with whatever name
// OpenSSH sends.
const CommandUser = sshconfig.CommandUser

// sessionHandler is the middleware chain every session and subsystem goes
// through, outermost first:
//
//	recover → logging → auth re-check → dispatch
//
// dispatch sends allocation sessions (user name = allocation id) to the
// proxy, and everything else to command mode. Direct-tcpip channels are
// not sessions; directTCPIP makes the same auth re-check itself.
func (g *Gateway) sessionHandler() ssh.Handler {
	return chain(g.dispatch,
		g.recoverMiddleware,
		g.loggingMiddleware,
		g.authMiddleware,
	)
}

// chain wraps h in mws, the first one outermost. (wish.WithMiddleware
// takes them the other way round.)
func chain(h ssh.Handler, mws ...wish.Middleware) ssh.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// recoverMiddleware turns a panic in one session into a logged error and a
// closed session, not a dead gateway. The recovering is wish's own
// (wish/recover), around the rest of the chain; it only logs, and a
// handler that returns has the library end the session with status 0, so
// a session whose handler panicked is then told and ends with
// exitGatewayError here: a panic never looks like success to the client.
// wish/recover composes its middlewares per call, so the chain is built
// per session with a logger that knows the session.
func (g *Gateway) recoverMiddleware(next ssh.Handler) ssh.Handler {
	return func(s ssh.Session) {
		log := &panicLog{log: g.log, s: s}
		rest := func(ssh.Handler) ssh.Handler { return next }
		recover.MiddlewareWithLogger(log, rest)(func(s ssh.Session) {
			if log.panicked {
				fail(s, errors.New("internal error in the gateway"))
			}
		})(s)
	}
}

// panicLog is wish/recover's logger for one session: it logs the panic
// (its value and stack, in wish's format) to the gateway's log and notes
// that there was one.
type panicLog struct {
	log      *slog.Logger
	s        ssh.Session
	panicked bool // set by Printf, read after it on the same goroutine
}

// Printf implements recover.Logger; wish calls it only for a panic.
func (p *panicLog) Printf(format string, v ...any) {
	p.panicked = true
	p.log.Error("panic in session", "user", p.s.User(), "remote", p.s.RemoteAddr(), "panic", fmt.Sprintf(format, v...))
}

// loggingMiddleware logs each session's start and end.
func (g *Gateway) loggingMiddleware(next ssh.Handler) ssh.Handler {
	return func(s ssh.Session) {
		start := time.Now()
		_, hasPty := g.ptyOf(s)
		attrs := []any{corrid.Key, corrid.From(s.Context()), "user", s.User(), "remote", s.RemoteAddr().String(), "pty", hasPty}
		switch {
		case s.Subsystem() != "":
			attrs = append(attrs, "subsystem", s.Subsystem())
		case s.RawCommand() != "":
			attrs = append(attrs, "command", truncate(s.RawCommand(), 200))
		}
		g.log.Info("session start", attrs...)
		next(s)
		g.log.Info("session end", append(attrs, "duration", time.Since(start).Round(time.Millisecond))...)
	}
}

// identityKey is the context key of the identity authMiddleware checked.
type identityKey struct{}

// authMiddleware re-checks, for every session, that the connection's
// identity was proven by the key that authenticated and that its
// certificate is still valid and trusted; the identity it hands on is the
// only one the handlers below use. It registers the session with the
// connection's login, so a revocation can tell it why it ends.
func (g *Gateway) authMiddleware(next ssh.Handler) ssh.Handler {
	return func(s ssh.Session) {
		id, err := g.identityOf(s.Context())
		if err != nil {
			g.log.Warn("session refused", "user", s.User(), "remote", s.RemoteAddr(), "err", err)
			fail(s, errors.New("authentication no longer valid: run `gpuaas login` and reconnect"))
			return
		}
		if g.stopping.Load() {
			fail(s, errShuttingDown)
			return
		}
		if lc := loginOf(s.Context()); lc != nil {
			if !lc.addSession(s) {
				if r := lc.endedReason(); r == reasonShutdown {
					fail(s, errShuttingDown)
				} else {
					fail(s, errLoginEnded(r))
				}
				return
			}
			defer lc.removeSession(s)
		}
		s.Context().SetValue(identityKey{}, id)
		next(s)
	}
}

// dispatch picks the handler for the session's user name.
func (g *Gateway) dispatch(s ssh.Session) {
	id, ok := s.Context().Value(identityKey{}).(sshcert.Identity)
	if !ok {
		fail(s, ErrNoIdentity)
		return
	}
	switch user := s.User(); {
	case ids.Valid(ids.Allocation, user):
		g.proxySession(s, id)
	case isWorkloadUser(user): // ssh <workload-id>@gateway: workload.go
		g.workloadSession(s, id, user)
	case api.IsVolumeID(user): // sftp to a volume, no allocation: volume.go
		g.volumeSession(s, id)
	case strings.HasPrefix(user, ids.Allocation+"-"):
		// Meant as an allocation, mistyped: running commands instead
		// would only confuse.
		fail(s, fmt.Errorf("%q is not an allocation id: ssh <allocation-id>@gateway opens an allocation (see `gpuaas alloc list`), ssh gateway <command> runs gpuaas commands", user))
	default:
		// Any other name (gpuaas, the local user name OpenSSH sends by
		// default, the user's id) is the dashboard or a command, always
		// as the certificate's user: the name grants nothing.
		g.commandSession(s, id)
	}
}

// fail tells the client why its session ends and ends it with
// exitGatewayError.
func fail(s ssh.Session, err error) {
	_, _ = fmt.Fprintf(s.Stderr(), "gpuaas gateway: %v\r\n", err)
	_ = s.Exit(exitGatewayError)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
