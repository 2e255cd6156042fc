// Package auth holds the top-level login, logout and whoami commands.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys"
)

// LoginOptions are the inputs of `gpuaas login`.
type LoginOptions struct {
	IO     *cmdutil.IOStreams
	Config func() (*clientconfig.Config, error)
	Active func() (clientconfig.Active, error)
	Client func() (*api.Client, error)
	// Reconnect opens a connection with the session just stored (the one
	// Client opened before may only log in); nil keeps Client's.
	Reconnect func() (*api.Client, error)
	Now       func() time.Time
	// HTTPClient talks to the identity provider (default: 30s timeout).
	HTTPClient *http.Client
	// OpenBrowser shows a URL to the user for --web; nil only prints it.
	OpenBrowser func(url string) error
	// WaitReminder is how often a login waiting on the identity provider
	// says it still waits (default a minute).
	WaitReminder time.Duration

	Email         string
	PasswordStdin bool
	// Web logs in through the browser (OIDC code flow with PKCE) rather
	// than the device flow.
	Web bool
	// Invite is a one-time invite code: redeeming it sets the password.
	Invite string
}

// NewCmdLogin builds `gpuaas login`; runF replaces loginRun in tests.
func NewCmdLogin(f *cmdutil.Factory, runF func(context.Context, *LoginOptions) error) *cobra.Command {
	opts := &LoginOptions{IO: f.IOStreams, Config: f.Config, Active: f.Active, Client: f.PreLoginClient, Reconnect: f.Reconnect, Now: f.Now,
		OpenBrowser: systemBrowser(os.Getenv("BROWSER"))}
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in and store a session token in the current context",
		Long: `Log in and store the session token, user id and expiry in the current
config context. Then have the server sign an SSH certificate for the
context's ed25519 key (generated on first login, kept afterwards), for
` + "`gpuaas ssh`" + ` and ` + "`gpuaas ssh-config`" + `.

The server says how it takes logins. With an OIDC identity provider,
login uses the OAuth device flow: it prints a one-time code and a URL to
open on any device, and waits until you approve there. --web uses the
browser on this machine instead (authorization code flow with PKCE and a
redirect to 127.0.0.1); the browser is $BROWSER, else the system's, and
the URL is printed in case none opens. The identity provider's ID token
is then exchanged for a session with the server. While it waits, login
says until when the code (or the browser login, 5 minutes) is valid;
Ctrl-C stops it. The identity provider's client must be public (no
secret), allow the device grant, and accept redirects to http://127.0.0.1
on any port (RFC 8252); docs/oidc.md in the source has the settings for
Dex, Keycloak and others. An IdP that refuses the client or the redirect
is reported before the browser opens.

With the local provider (or --email / --password-stdin), login takes an
email and password. The email defaults to the context's user; the
password is read without echo from the terminal, or from standard input
with --password-stdin (one line; more lines are refused).

--invite CODE redeems the one-time code an administrator gave you
(` + "`gpuaas admin user add`" + ` or ` + "`invite`" + `): you choose your password, asked twice on
a terminal or read from standard input with --password-stdin (one line,
or the same line twice), and are
logged in. A code works once; for an account that had a password it is a
reset, which ends the account's other sessions.

Repeated failed logins are refused for a while (exit code 11,
rate_limited; the message says when to retry).`,
		Example: `  gpuaas login
  gpuaas login --web
  gpuaas login --email ada@example.com
  echo "$PASSWORD" | gpuaas login --email ada@example.com --password-stdin
  gpuaas login --invite 7QJ3YB2ZKXW4M6N5P8R9T2V3CD`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Web && (opts.Email != "" || opts.PasswordStdin) {
				return cmdutil.FlagErrorf("--web logs in through the identity provider: it takes no --email or --password-stdin")
			}
			if opts.Invite = strings.TrimSpace(opts.Invite); opts.Invite == "" && c.Flags().Changed("invite") {
				return cmdutil.FlagErrorf("--invite needs the code you were given")
			}
			if opts.Invite != "" && opts.Web {
				return cmdutil.FlagErrorf("--invite sets a password: it does not go with --web")
			}
			if (opts.Email != "" || opts.Invite != "") && !opts.PasswordStdin && !opts.IO.IsStdinTTY() {
				return errPasswordInput // before dialling: the flags alone say a password is coming
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return loginRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Email, "email", "", "Email to log in as with a password (default: the context's user)")
	cmd.Flags().BoolVar(&opts.PasswordStdin, "password-stdin", false, "Read the password from standard input")
	cmd.Flags().BoolVar(&opts.Web, "web", false, "Log in with the identity provider in a browser on this machine")
	cmd.Flags().StringVar(&opts.Invite, "invite", "", "Redeem a one-time invite `CODE`: set your password and log in")
	return cmd
}

func loginRun(ctx context.Context, opts *LoginOptions) error {
	active, err := opts.Active()
	if err != nil {
		return err
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	var resp *api.LoginResponse
	if opts.Invite != "" {
		resp, err = inviteLogin(ctx, opts, client)
	} else if opts.Email != "" || opts.PasswordStdin {
		resp, err = passwordLogin(ctx, opts, active, client)
	} else {
		resp, err = chooseLogin(ctx, opts, active, client)
	}
	if err != nil {
		return err
	}
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	if err := pinServer(ctx, opts, cfg, active, client, resp); err != nil {
		return err
	}
	storeLogin(cfg, active, resp)
	if err := cfg.Save(); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Logged in as %s (context %s)\n", resp.User.Email, active.Name)
	if opts.Reconnect != nil {
		if client, err = opts.Reconnect(); err != nil {
			// The session is stored: only ssh lacks its certificate.
			fmt.Fprintf(opts.IO.ErrOut, "warning: no SSH certificate yet: %v (`gpuaas ssh-config` retries)\n", err)
			return nil
		}
		opts.Client = func() (*api.Client, error) { return client, nil }
	}
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

// chooseLogin asks the server how it takes logins: through its identity
// provider when it has one, else with a password.
func chooseLogin(ctx context.Context, opts *LoginOptions, active clientconfig.Active, client *api.Client) (*api.LoginResponse, error) {
	methods, err := client.AuthConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("ask the server how to log in: %w", err)
	}
	switch {
	case methods.OIDC != nil:
		return oidcLogin(ctx, opts, *methods.OIDC, client)
	case opts.Web:
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: "this server has no identity provider for --web",
			Hint: "log in with a password: `gpuaas login`"}
	case !methods.Password:
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: "this server accepts no login method this CLI knows"}
	}
	return passwordLogin(ctx, opts, active, client)
}

var errPasswordInput = cmdutil.FlagErrorf("standard input is not a terminal: use --password-stdin to pass the password")

// passwordLogin logs in with the local provider.
func passwordLogin(ctx context.Context, opts *LoginOptions, active clientconfig.Active, client *api.Client) (*api.LoginResponse, error) {
	if !opts.PasswordStdin && !opts.IO.IsStdinTTY() {
		return nil, errPasswordInput
	}
	email, err := loginEmail(ctx, opts, active)
	if err != nil {
		return nil, err
	}
	password, err := loginPassword(ctx, opts, passwordPrompt(email, active))
	if err != nil {
		return nil, err
	}
	resp, err := client.Login(ctx, api.LoginRequest{Email: email, Password: password})
	if errors.Is(err, api.ErrUnauthenticated) {
		// Not "run gpuaas login": that is what the user just did.
		return nil, &api.Error{Code: api.CodeUnauthenticated, Message: "login failed: " + err.Error(),
			Hint: "check the email and password"}
	}
	return resp, err
}

// inviteLogin redeems an invite: the new password, asked twice on a
// terminal, becomes the account's.
func inviteLogin(ctx context.Context, opts *LoginOptions, client *api.Client) (*api.LoginResponse, error) {
	if !opts.PasswordStdin && !opts.IO.IsStdinTTY() {
		return nil, errPasswordInput
	}
	password, err := newPassword(ctx, opts)
	if err != nil {
		return nil, err
	}
	resp, err := client.Login(ctx, api.LoginRequest{Invite: opts.Invite, Email: opts.Email, Password: password})
	var e *api.Error
	if errors.As(err, &e) && e.Code == api.CodeUnauthenticated {
		return nil, &api.Error{Code: e.Code, Message: "login failed: " + e.Message, Hint: e.Hint}
	}
	return resp, err
}

// newPassword reads the password to set: from standard input with
// --password-stdin, else twice from the terminal, without echo.
func newPassword(ctx context.Context, opts *LoginOptions) (string, error) {
	if opts.PasswordStdin {
		return stdinPassword(ctx, opts, true)
	}
	pw, err := opts.IO.ReadPassword(ctx, "New password: ")
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	if pw == "" {
		return "", cmdutil.FlagErrorf("empty password")
	}
	again, err := opts.IO.ReadPassword(ctx, "Repeat the new password: ")
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	if again != pw {
		return "", cmdutil.FlagErrorf("the two passwords differ; nothing was changed")
	}
	return pw, nil
}

// writeSSHConfig refreshes the context's OpenSSH config when the context
// knows its gateway (as `gpuaas dev` sets up), so `ssh <alloc>@gateway`
// works right after a login; otherwise `gpuaas ssh-config` does it.
func writeSSHConfig(ctx context.Context, opts *LoginOptions, active clientconfig.Active) {
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
func issueSSHCert(ctx context.Context, opts *LoginOptions, cfg *clientconfig.Config, active clientconfig.Active,
	resp *api.LoginResponse, client *api.Client) (*sshkeys.Identity, error) {
	active.Token, active.TokenExpiresAt = resp.Token, resp.ExpiresAt
	// The client at hand carries the token of before the login.
	withSession := client.With(api.WithToken(resp.Token), api.WithProject(active.Project))
	r := sshkeys.ForActive(cfg, active, func() (*api.Client, error) { return withSession, nil }, opts.Now)
	return r.Renew(ctx)
}

func loginEmail(ctx context.Context, opts *LoginOptions, active clientconfig.Active) (string, error) {
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

// passwordPrompt says whose password is asked and where it is sent: a
// bare "Password:" left the user guessing which account and server.
func passwordPrompt(email string, active clientconfig.Active) string {
	where := active.Name
	if active.Server != "" {
		where = fmt.Sprintf("%s (%s)", active.Name, active.Server)
	}
	return fmt.Sprintf("Password for %s on %s: ", email, where)
}

// loginPassword reads the password: all of standard input with
// --password-stdin, else a line from the terminal after prompt, without
// echo.
func loginPassword(ctx context.Context, opts *LoginOptions, prompt string) (string, error) {
	if opts.PasswordStdin {
		return stdinPassword(ctx, opts, false)
	}
	pw, err := opts.IO.ReadPassword(ctx, prompt)
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	if pw == "" {
		return "", cmdutil.FlagErrorf("empty password")
	}
	return pw, nil
}

// stdinPassword reads the password from standard input: one line. As the
// terminal asks a new password twice, a second line is taken as its
// repetition when confirm is set (it must be the same); anything more is
// refused, changing nothing, rather than taken as a password with a line
// break in it.
func stdinPassword(ctx context.Context, opts *LoginOptions, confirm bool) (string, error) {
	raw, err := opts.IO.ReadAll(ctx)
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	lines := strings.Split(strings.TrimRight(raw, "\r\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	switch {
	case lines[0] == "":
		return "", cmdutil.FlagErrorf("empty password")
	case len(lines) == 1:
		return lines[0], nil
	case confirm && len(lines) == 2 && lines[1] != lines[0]:
		return "", cmdutil.FlagErrorf("the two passwords on standard input differ; nothing was changed")
	case confirm && len(lines) == 2:
		return lines[0], nil
	}
	return "", cmdutil.FlagErrorf("--password-stdin takes the password alone on one line, got %d lines; nothing was changed", len(lines))
}

// storeLogin records a session in the active context, creating the context
// (on the active server) when the file has none by that name.
func storeLogin(cfg *clientconfig.Config, active clientconfig.Active, resp *api.LoginResponse) {
	cfg.UpdateActive(active, func(c *clientconfig.Context) {
		c.User = resp.User.Email
		c.UserID = resp.User.ID
		c.Token = resp.Token
		c.TokenExpiresAt = resp.ExpiresAt
	})
}
