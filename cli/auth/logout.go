package auth

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys"
)

// LogoutOptions are the inputs of `gpuaas logout`.
type LogoutOptions struct {
	IO     *cmdutil.IOStreams
	Config func() (*clientconfig.Config, error)
	Active func() (clientconfig.Active, error)
	Client func() (*api.Client, error)
}

// NewCmdLogout builds `gpuaas logout`; runF replaces logoutRun in tests.
func NewCmdLogout(f *cmdutil.Factory, runF func(context.Context, *LogoutOptions) error) *cobra.Command {
	opts := &LogoutOptions{IO: f.IOStreams, Config: f.Config, Active: f.Active, Client: f.Client}
	return &cobra.Command{
		Use:   "logout",
		Short: "Revoke the session and forget its token",
		Long: `Revoke the current context's session on the server and remove its token
from the config, and the context's SSH certificate (its key is kept). The
token is removed even when the server says it is already invalid.`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return logoutRun(c.Context(), opts)
		},
	}
}

func logoutRun(ctx context.Context, opts *LogoutOptions) error {
	active, err := opts.Active()
	if err != nil {
		return err
	}
	if active.Token == "" {
		fmt.Fprintf(opts.IO.ErrOut, "Not logged in (context %s)\n", active.Name)
		return removeSSHCert(opts, active.Name)
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	// An unauthenticated reply means the token is already dead: the goal.
	if _, err := client.Logout(ctx); err != nil && !errors.Is(err, api.ErrUnauthenticated) {
		return err
	}
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	if clearToken(cfg, active.Name) {
		if err := cfg.Save(); err != nil {
			return err
		}
	}
	fmt.Fprintf(opts.IO.ErrOut, "Logged out of %s (context %s)\n", active.Server, active.Name)
	return removeSSHCert(opts, active.Name)
}

// removeSSHCert deletes the context's SSH certificate, keeping its key for
// the next login.
func removeSSHCert(opts *LogoutOptions, contextName string) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	_, err = sshkeys.RemoveCert(sshkeys.For(filepath.Dir(cfg.Path()), contextName))
	return err
}

// clearToken removes the session from the named context, keeping the user
// so the next login need not ask for the email. It reports whether
// anything changed.
func clearToken(cfg *clientconfig.Config, name string) bool {
	c, ok := cfg.Context(name)
	if !ok || (c.Token == "" && c.TokenExpiresAt.IsZero()) {
		return false
	}
	cfg.UpdateContext(name, func(c *clientconfig.Context) {
		c.Token = ""
		c.TokenExpiresAt = time.Time{}
	})
	return true
}
