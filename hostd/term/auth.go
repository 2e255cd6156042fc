package term

import (
	"fmt"
	"maps"
	"net"
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
// under the state directory, so nothing else may reach the environment
// (env.VMKeyPath, env.SeedDir).
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

// Authentication has two steps, both public keys, in this order:
//
//  1. a gateway certificate (sshcert.VerifyGateway: the internal CA
//     certifies a gateway key an admin registered), proving the
//     connection comes from sshgate;
//  2. a ticket (verify), saying what it may open.
//
// The first step ends in a partial success (gossh.PartialSuccessError),
// after which only tickets are looked at. Each step's identity is taken
// from the key that proved possession (VerifiedPublicKeyCallback's key),
// never from a key merely offered. A ticket alone — stolen, or minted for
// the attacker's key by a stolen gateway token — opens nothing, and
// neither does a gateway certificate alone.

// offered runs for every key a client offers in the first step, proven or
// not: only a gateway certificate is worth proving.
func (s *Server) offered(ctx ssh.Context, key ssh.PublicKey) bool {
	if _, err := s.verifyGateway(key); err != nil {
		s.cfg.Log.Info("terminal key refused: not a gateway certificate", "remote", ctx.RemoteAddr().String(),
			"user", ctx.User(), "err", err)
		return false
	}
	return true
}

// verifyGateway checks a gateway certificate against the trusted internal
// CA keys.
func (s *Server) verifyGateway(key gossh.PublicKey) (sshcert.GatewayIdentity, error) {
	node, _, trusted := s.state()
	if node == "" || len(trusted) == 0 {
		return sshcert.GatewayIdentity{}, ErrNotReady
	}
	return sshcert.VerifyGateway(trusted, key, s.now())
}

// ticketOffered is the second step's PublicKeyCallback: it records the
// ticket against the very key it was verified from (sshcert's guard), in
// Permissions of that key's own.
func (s *Server) ticketOffered(meta gossh.ConnMetadata, key gossh.PublicKey) (*gossh.Permissions, error) {
	t, _, err := s.verify(meta.User(), key)
	if err != nil {
		s.cfg.Log.Info("terminal key refused", "remote", meta.RemoteAddr().String(), "user", meta.User(), "err", err)
		return nil, err
	}
	return sshcert.VerifiedTicket(key, t).Permissions(), nil
}

// serverConfig runs both steps once a key has proved possession. First
// step: the key must be a gateway certificate; the answer is a partial
// success whose only method is a ticket. Second step: the ticket is
// checked again, its serial is spent, and the identity is confirmed for
// that key only. The connection's state then holds the gateway, the
// ticket and its extensions.
func (s *Server) serverConfig(ctx ssh.Context) *gossh.ServerConfig {
	cfg := &gossh.ServerConfig{MaxAuthTries: 6}
	cfg.VerifiedPublicKeyCallback = func(meta gossh.ConnMetadata, key gossh.PublicKey, perms *gossh.Permissions, _ string) (*gossh.Permissions, error) {
		c, ok := ctx.Value(connKey{}).(*conn)
		if !ok {
			return nil, ErrNotReady
		}
		gw := c.gatewayIdentity()
		if gw == nil {
			id, err := s.verifyGateway(key)
			if err != nil {
				return nil, err
			}
			c.gatewayAuthenticated(id)
			s.cfg.Log.Debug("terminal gateway authenticated", "gateway", id.Name, "key_id", id.KeyID,
				"remote", meta.RemoteAddr().String())
			return nil, &gossh.PartialSuccessError{Next: gossh.ServerAuthCallbacks{PublicKeyCallback: s.ticketOffered}}
		}
		if !sshcert.FingerprintMatches(perms, key) {
			return nil, sshcert.ErrUnverifiedKey
		}
		t, exts, err := s.spend(meta.User(), key)
		if err != nil {
			return nil, err
		}
		if err := sshcert.ConfirmKey(perms, key); err != nil {
			return nil, err
		}
		s.admit(c, t, exts, gw, meta.RemoteAddr(), "ssh")
		return perms, nil
	}
	return cfg
}

// spend checks a ticket whose key proved possession (verify) and spends
// its serial: a serial opens one connection, SSH or link, once.
func (s *Server) spend(user string, key gossh.PublicKey) (sshcert.Ticket, map[string]string, error) {
	t, exts, err := s.verify(user, key)
	if err != nil {
		return sshcert.Ticket{}, nil, err
	}
	if !s.replay.claim(t.Serial, t.ValidBefore, s.now()) {
		return sshcert.Ticket{}, nil, fmt.Errorf("%w: serial %d", ErrReplayed, t.Serial)
	}
	return t, exts, nil
}

// admit records on c the spent ticket it authenticated with (after the
// gateway gw) and logs it.
func (s *Server) admit(c *conn, t sshcert.Ticket, exts map[string]string, gw *sshcert.GatewayIdentity, remote net.Addr, transport string) {
	c.authenticated(t, exts)
	s.cfg.Log.Info("terminal ticket accepted", "allocation", t.Allocation, "user", t.PosixUser,
		"key_id", t.KeyID, "serial", t.Serial, "gateway", gw.Name, "remote", remote.String(), "transport", transport)
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
