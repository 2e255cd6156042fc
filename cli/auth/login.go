// Package auth holds the top-level login, logout and whoami commands.
package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/config"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
	"github.com/gpuaas/gpuaas/cli/sshkeys"
	"github.com/gpuaas/gpuaas/internal/api"
)

// LoginOptions are the inputs of `gpuaas login`.
type LoginOptions struct {
	IO     *cmdutil.IOStreams
	Config func() (*config.Config, error)
	Active func() (config.Active, error)
	Client func() (*api.Client, error)
	Now    func() time.Time

	Email         string
	PasswordStdin bool
}

// NewCmdLogin builds `gpuaas login`; runF replaces loginRun in tests.
func NewCmdLogin(f *cmdutil.Factory, runF func(context.Context, *LoginOptions) error) *cobra.Command {
	opts := &LoginOptions{IO: f.IOStreams, Config: f.Config, Active: f.Active, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in and store a session token in the current context",
		Long: `Log in with the local provider (email and password) and store the session
token, user id and expiry in the current config context. Then have the
server sign an SSH certificate for the context's ed25519 key (generated on
first login, kept afterwards), for ` + "`gpuaas ssh`" + ` and ` + "`gpuaas ssh-config`" + `.

The email defaults to the context's user; the password is read without echo
from the terminal, or from standard input with --password-stdin.`,
		Example: `  gpuaas login
  gpuaas login --email ada@example.com
  echo "$PASSWORD" | gpuaas login --email ada@example.com --password-stdin`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !opts.PasswordStdin && !opts.IO.IsStdinTTY() {
				return cmdutil.FlagErrorf("standard input is not a terminal: use --password-stdin to pass the password")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return loginRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Email, "email", "", "Email to log in as (default: the context's user)")
	cmd.Flags().BoolVar(&opts.PasswordStdin, "password-stdin", false, "Read the password from standard input")
	return cmd
}

func loginRun(ctx context.Context, opts *LoginOptions) error {
	active, err := opts.Active()
	if err != nil {
		return err
	}
	email, err := loginEmail(ctx, opts, active)
	if err != nil {
		return err
	}
	password, err := loginPassword(ctx, opts)
	if err != nil {
		return err
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.Login(ctx, api.LoginRequest{Email: email, Password: password})
	if errors.Is(err, api.ErrUnauthenticated) {
		// Not "run gpuaas login": that is what the user just did.
		return &api.Error{Code: api.CodeUnauthenticated, Message: "login failed: " + err.Error(),
			Hint: "check the email and password"}
	}
	if err != nil {
		return err
	}
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	storeLogin(cfg, active, resp)
	if err := cfg.Save(); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Logged in as %s (context %s)\n", resp.User.Email, active.Name)
	// The session is what matters; without a certificate only ssh is
	// missing, and the commands that need one retry.
	if id, err := issueSSHCert(ctx, opts, cfg, active, resp, client); err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "warning: no SSH certificate yet: %v (`gpuaas ssh-config` retries)\n", err)
	} else if end := sshkeys.ValidBefore(id.Cert); !end.IsZero() {
		fmt.Fprintf(opts.IO.ErrOut, "SSH certificate for %s valid until %s\n", id.Paths.Key, end.Local().Format(time.DateTime))
		writeSSHConfig(ctx, opts, active)
	}
	return nil
}

// writeSSHConfig refreshes the context's OpenSSH config when the context
// knows its gateway (as `gpuaas dev` sets up), so `ssh <alloc>@gateway`
// works right after a login; otherwise `gpuaas ssh-config` does it.
func writeSSHConfig(ctx context.Context, opts *LoginOptions, active config.Active) {
	if active.Gateway == "" {
		return
	}
	setup, err := sshconfig.Prepare(ctx, sshconfig.Env{IO: opts.IO, Config: opts.Config, Active: opts.Active,
		Client: opts.Client, Now: opts.Now}, "")
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "warning: SSH config not written: %v (run `gpuaas ssh-config`)\n", err)
		return
	}
	fmt.Fprintf(opts.IO.ErrOut, "SSH config %s is current (see `gpuaas ssh-config` for the Include line)\n", setup.Paths.Config)
}

// issueSSHCert has the new session sign the context's key (generated on
// first use). It always renews: the certificate's lifetime follows the
// session it was signed under.
func issueSSHCert(ctx context.Context, opts *LoginOptions, cfg *config.Config, active config.Active,
	resp *api.LoginResponse, client *api.Client) (*sshkeys.Identity, error) {
	active.Token, active.TokenExpiresAt = resp.Token, resp.ExpiresAt
	// The client at hand carries the token of before the login.
	withSession := api.NewClient(client.Conn(), api.WithToken(resp.Token), api.WithProject(active.Project))
	r := sshkeys.ForActive(cfg, active, func() (*api.Client, error) { return withSession, nil }, opts.Now)
	return r.Renew(ctx)
}

func loginEmail(ctx context.Context, opts *LoginOptions, active config.Active) (string, error) {
	switch {
	case opts.Email != "":
		return opts.Email, nil
	case active.User != "":
		return active.User, nil
	case opts.PasswordStdin || !opts.IO.CanPrompt():
		return "", cmdutil.FlagErrorf("--email is required (the context %q has no user)", active.Name)
	}
	email, err := opts.IO.Prompt(ctx, "Email: ")
	if err != nil {
		return "", err
	}
	if email = strings.TrimSpace(email); email == "" {
		return "", cmdutil.FlagErrorf("no email given")
	}
	return email, nil
}

func loginPassword(ctx context.Context, opts *LoginOptions) (string, error) {
	var pw string
	var err error
	if opts.PasswordStdin {
		pw, err = opts.IO.ReadAll(ctx)
		pw = strings.TrimRight(pw, "\r\n")
	} else {
		pw, err = opts.IO.ReadPassword(ctx, "Password: ")
	}
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	if pw == "" {
		return "", cmdutil.FlagErrorf("empty password")
	}
	return pw, nil
}

// storeLogin records a session in the active context, creating the context
// (on the active server) when the file has none by that name.
func storeLogin(cfg *config.Config, active config.Active, resp *api.LoginResponse) {
	cfg.UpdateActive(active, func(c *config.Context) {
		c.User = resp.User.Email
		c.UserID = resp.User.ID
		c.Token = resp.Token
		c.TokenExpiresAt = resp.ExpiresAt
	})
}
