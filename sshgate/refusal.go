package sshgate

import (
	"errors"
	"sync"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// A refused key gets a reason. The gateway cannot write to a client that
// has not authenticated, but SSH lets a server send a banner during
// authentication (SSH_MSG_USERAUTH_BANNER), which OpenSSH prints on stderr
// (at its default LogLevel): so `ssh ID@gateway` after `gpuaas logout`,
// which removes the certificate and keeps the key, says why it fails and
// what to do instead of only "Permission denied (publickey)". The banner
// goes out once per connection, for the first key refused; a client
// offering other keys first (without IdentitiesOnly, which `gpuaas
// ssh-config` sets) may still log in after it, so it says "if".

// refusalKey is the context key of a connection's *refusalBanner.
type refusalKey struct{}

// refusalBanner sends a connection's refusal banner once.
type refusalBanner struct {
	conn gossh.ServerPreAuthConn
	once sync.Once
}

// refusalMessage is what a client whose key was refused for err is told.
func refusalMessage(err error) string {
	const login = "run `gpuaas login` (or `gpuaas ssh-config --write` if you never did), then connect again"
	var why string
	switch {
	case errors.Is(err, sshcert.ErrNotCertificate):
		why = "it has no gpuaas certificate: `gpuaas logout` removes this machine's, and a login expired or ended by an administrator leaves none that works"
	case errors.Is(err, sshcert.ErrExpired):
		why = "its gpuaas certificate has expired (it lasts as long as your login)"
	case errors.Is(err, sshcert.ErrUntrustedCA):
		why = "its certificate was not issued by this platform (or before a rotation of its certificate authority)"
	default:
		why = "its certificate is not a gpuaas user certificate this gateway accepts"
	}
	return "gpuaas: a key was refused: " + why + ".\ngpuaas: if you cannot log in, " + login + ".\n"
}

// tellRefused sends the connection's refusal banner for err, once.
func tellRefused(ctx ssh.Context, err error) {
	b, ok := ctx.Value(refusalKey{}).(*refusalBanner)
	if !ok || b.conn == nil {
		return
	}
	b.once.Do(func() { _ = b.conn.SendAuthBanner(refusalMessage(err)) })
}
