package term

import (
	"fmt"
	"maps"
	"regexp"
	"sync"
	"time"

	"github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// allocIDRE is what tasks accept as an allocation id: it names files
// under the state directory, so nothing else may reach tasks.PathsFor.
var allocIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// verify checks a key offered by user: a ticket from a trusted CA for this
// node, valid now, for an allocation id and POSIX user hostd can act on,
// whose SSH user is the ticket's POSIX user, which is the allocation's
// (api.PosixUser), and whose serial was not used. It returns the ticket and
// the certificate's extensions (permit-pty, permit-port-forwarding).
func (s *Server) verify(user string, key gossh.PublicKey) (sshcert.Ticket, map[string]string, error) {
	node, _, trusted := s.state()
	if node == "" || len(trusted) == 0 {
		return sshcert.Ticket{}, nil, ErrNotReady
	}
	now := s.now()
	t, err := sshcert.VerifyTicket(trusted, key, node, now)
	if err != nil {
		return sshcert.Ticket{}, nil, err
	}
	switch {
	case user != t.PosixUser:
		return sshcert.Ticket{}, nil, fmt.Errorf("%w: ssh user %q, ticket for %q", ErrWrongUser, user, t.PosixUser)
	case !allocIDRE.MatchString(t.Allocation) || host.CheckUserName(t.PosixUser) != nil:
		return sshcert.Ticket{}, nil, fmt.Errorf("%w: allocation %q, user %q", ErrBadTicket, t.Allocation, t.PosixUser)
	case t.PosixUser != api.PosixUser(t.Allocation):
		return sshcert.Ticket{}, nil, fmt.Errorf("%w: %q is not the user of allocation %s", ErrWrongUser, t.PosixUser, t.Allocation)
	case s.replay.used(t.Serial, now):
		return sshcert.Ticket{}, nil, fmt.Errorf("%w: serial %d", ErrReplayed, t.Serial)
	}
	// VerifyTicket accepted key as a certificate.
	return t, maps.Clone(key.(*gossh.Certificate).Extensions), nil
}

// offered runs for every key a client offers, proven or not: it records
// the ticket against that very key (sshcert's guard) and lets the client
// go on to prove it.
func (s *Server) offered(ctx ssh.Context, key ssh.PublicKey) bool {
	t, _, err := s.verify(ctx.User(), key)
	if err != nil {
		s.cfg.Log.Info("terminal key refused", "remote", ctx.RemoteAddr().String(), "user", ctx.User(), "err", err)
		return false
	}
	sshcert.VerifiedTicket(key, t).Store(ctx.Permissions().Permissions)
	return true
}

// serverConfig completes the guard: once a key has proved possession, its
// ticket is checked again, its serial is spent, and the identity is
// confirmed for that key only. The connection's state then holds the
// ticket and its extensions.
func (s *Server) serverConfig(ctx ssh.Context) *gossh.ServerConfig {
	cfg := &gossh.ServerConfig{MaxAuthTries: 6}
	cfg.VerifiedPublicKeyCallback = func(meta gossh.ConnMetadata, key gossh.PublicKey, perms *gossh.Permissions, _ string) (*gossh.Permissions, error) {
		if !sshcert.FingerprintMatches(perms, key) {
			return nil, sshcert.ErrUnverifiedKey
		}
		t, exts, err := s.verify(meta.User(), key)
		if err != nil {
			return nil, err
		}
		if !s.replay.claim(t.Serial, t.ValidBefore, s.now()) {
			return nil, fmt.Errorf("%w: serial %d", ErrReplayed, t.Serial)
		}
		if err := sshcert.ConfirmKey(perms, key); err != nil {
			return nil, err
		}
		if c, ok := ctx.Value(connKey{}).(*conn); ok {
			c.authenticated(t, exts)
		}
		s.cfg.Log.Info("terminal ticket accepted", "allocation", t.Allocation, "user", t.PosixUser,
			"key_id", t.KeyID, "serial", t.Serial, "remote", meta.RemoteAddr().String())
		return perms, nil
	}
	return cfg
}

// replaySet remembers the serials of tickets already used until they
// expire; after that the ticket itself is refused as expired.
type replaySet struct {
	// mu protects seen.
	mu   sync.Mutex
	seen map[uint64]time.Time // serial → the ticket's ValidBefore
}

func newReplaySet() *replaySet { return &replaySet{seen: map[uint64]time.Time{}} }

// used reports whether serial was claimed and has not expired.
func (r *replaySet) used(serial uint64, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.seen[serial]
	return ok && now.Before(until)
}

// claim marks serial used until validBefore; false if it already was.
func (r *replaySet) claim(serial uint64, validBefore, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s, until := range r.seen {
		if !now.Before(until) {
			delete(r.seen, s)
		}
	}
	if _, ok := r.seen[serial]; ok {
		return false
	}
	r.seen[serial] = validBefore
	return true
}
