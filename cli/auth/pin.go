package auth

import (
	"context"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/trust"
)

// pinServer checks, before a login is stored, that the server is the one
// the context pinned (its signed trust bundle, and the login reply's token
// signed by its key), pinning it at the first login. The pins are saved
// with the session; a refusal stores nothing. ssh.cas is asked with the
// new session, over the login's connection, as issueSSHCert asks for the
// certificate.
func pinServer(ctx context.Context, opts *LoginOptions, cfg *clientconfig.Config, active clientconfig.Active,
	client *api.Client, resp *api.LoginResponse) error {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	withSession := client.With(api.WithToken(resp.Token), api.WithProject(active.Project))
	return trust.PinLogin(ctx, opts.IO.ErrOut, cfg, active, withSession, resp, now())
}
