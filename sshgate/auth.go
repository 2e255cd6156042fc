package sshgate

import (
	"fmt"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/corrid"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// Authentication accepts user certificates of the user CA and nothing else:
// the server has a PublicKeyHandler only (no password, keyboard-interactive
// or "none"), and that handler accepts what sshcert.VerifyUser accepts —
// a user certificate (not a host certificate, not a ticket), signed by a
// trusted user CA key, inside its validity window, with no critical options
// and exactly one principal, which must be a gpuaas user id.
//
// Key confusion (CVE-2024-45337): the handler also runs for keys a client
// only offers. It stores the identity bound to the key it was verified from
// (sshcert.VerifiedUser(...).Store); VerifiedPublicKeyCallback, which x/crypto
// runs only after the client proved it holds the key, confirms the binding
// (sshcert.ConfirmKey); sessions read the identity with sshcert.VerifiedFrom
// and nothing else. A client that offers Bob's certificate and signs with
// Alice's key is Alice or nobody.

// publicKeyHandler verifies a key offered by a client.
func (g *Gateway) publicKeyHandler(ctx ssh.Context, key ssh.PublicKey) bool {
	id, err := sshcert.VerifyUser(g.core.Trust().User, key, "", g.cfg.Now())
	if err == nil && !ids.Valid(ids.User, id.UserID) {
		err = fmt.Errorf("%w: principal %q is not a user id", sshcert.ErrPrincipal, id.UserID)
	}
	if err != nil {
		g.log.Debug("public key refused", "remote", ctx.RemoteAddr(), "user", ctx.User(),
			"key", gossh.FingerprintSHA256(key), "err", err)
		tellRefused(ctx, err)
		return false
	}
	sshcert.VerifiedUser(key, id).Store(ctx.Permissions().Permissions)
	return true
}

// serverConfig is the x/crypto configuration of every connection: it
// confirms an identity only for the key that signed, and then lifts the
// handshake deadline connCallback set.
func (g *Gateway) serverConfig(ctx ssh.Context) *gossh.ServerConfig {
	// One correlation id per connection: on its session lines here and
	// on every call to controld made for it (api.Client reads it from
	// the context).
	corrid.Set(ctx, corrid.New())
	return &gossh.ServerConfig{
		// The connection, to tell a refused key why (refusal.go).
		PreAuthConnCallback: func(c gossh.ServerPreAuthConn) {
			ctx.SetValue(refusalKey{}, &refusalBanner{conn: c})
		},
		VerifiedPublicKeyCallback: func(conn gossh.ConnMetadata, key gossh.PublicKey, perms *gossh.Permissions, _ string) (*gossh.Permissions, error) {
			if err := sshcert.ConfirmKey(perms, key); err != nil {
				g.log.Warn("authenticated key is not the verified one", "remote", conn.RemoteAddr(), "user", conn.User(), "err", err)
				return nil, err
			}
			if st, ok := ctx.Value(connStateKey{}).(*connState); ok {
				st.conn.authenticated()
			}
			g.trackLogin(ctx, key, perms)
			return perms, nil
		},
	}
}

// identityOf returns the user identity of an established connection,
// re-checked now: the certificate is still inside its window and its CA is
// still trusted (a multiplexed connection may open sessions long after it
// authenticated, and a rotation may have retired the CA meanwhile), it
// names a login session, and that login has not been seen to end (see
// revoke.go).
func (g *Gateway) identityOf(ctx ssh.Context) (sshcert.Identity, error) {
	perms := ctx.Permissions()
	if perms == nil || perms.Permissions == nil {
		return sshcert.Identity{}, ErrNoIdentity
	}
	v, err := sshcert.VerifiedFrom(perms.Permissions)
	if err != nil {
		return sshcert.Identity{}, fmt.Errorf("%w: %v", ErrNoIdentity, err)
	}
	if v.User == nil {
		return sshcert.Identity{}, fmt.Errorf("%w: not a user certificate", ErrNoIdentity)
	}
	id := *v.User
	if now := g.cfg.Now(); !now.Before(id.ValidBefore) {
		return sshcert.Identity{}, fmt.Errorf("%w: expired at %s", ErrCertificateNoLongerValid, id.ValidBefore)
	}
	if !core.CATrusted(g.core.Trust().User, id.CA) {
		return sshcert.Identity{}, fmt.Errorf("%w: CA %s no longer trusted", ErrCertificateNoLongerValid, id.CA)
	}
	if id.SessionID == "" {
		return sshcert.Identity{}, fmt.Errorf("%w: it names no login session", ErrCertificateNoLongerValid)
	}
	if lc := loginOf(ctx); lc != nil {
		if reason := lc.endedReason(); reason != "" {
			return sshcert.Identity{}, fmt.Errorf("%w: login %s %s", ErrCertificateNoLongerValid, id.SessionID, reason)
		}
	}
	return id, nil
}

// permits reports whether the certificate grants extension ext.
func permits(id sshcert.Identity, ext string) bool {
	_, ok := id.Extensions[ext]
	return ok
}

// ptyCallback allows a PTY only to certificates with permit-pty.
func (g *Gateway) ptyCallback(ctx ssh.Context, _ ssh.Pty) bool {
	id, err := g.identityOf(ctx)
	return err == nil && permits(id, sshcert.ExtensionPermitPTY)
}
