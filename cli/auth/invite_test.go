package auth

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// TestLoginInvite redeems invites through `gpuaas login --invite` against a
// real controld: on a terminal the password is asked twice, and two
// different answers change nothing; --password-stdin reads it once.
func TestLoginInvite(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	cfg := devConfig(t, env.NATSURL)
	login := func(tty bool, input string, edit func(*LoginOptions)) (string, error) {
		ios, in, _, errOut := cmdtest.Streams(tty)
		in.WriteString(input)
		opts := &LoginOptions{IO: ios, Now: time.Now,
			Config: func() (*clientconfig.Config, error) { return cfg, nil },
			Active: func() (clientconfig.Active, error) { return cfg.Active(clientconfig.Overrides{Context: "dev"}), nil },
			Client: func() (*api.Client, error) { return env.AnonClient(), nil },
		}
		edit(opts)
		err := loginRun(ctx, opts)
		return errOut.String(), err
	}

	ada, err := admin.AdminUserAdd(ctx, api.UserAddRequest{Email: "ada@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := login(true, "first password\nfirst passwort\n", func(o *LoginOptions) { o.Invite = ada.Invite.Code })
	var fe *cmdutil.FlagError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "differ") {
		t.Fatalf("two different passwords: got %v; want a usage error saying they differ", err)
	}
	if stderr != "New password: Repeat the new password: " {
		t.Fatalf("prompts: got %q", stderr)
	}
	stderr, err = login(true, "first password\nfirst password\n", func(o *LoginOptions) { o.Invite = ada.Invite.Code })
	if err != nil {
		t.Fatalf("login --invite: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "Logged in as ada@example.test") || !strings.Contains(stderr, "SSH certificate") {
		t.Fatalf("stderr %q; want the login and the SSH certificate reported", stderr)
	}
	c, _ := cfg.Context("dev")
	if who, err := env.Client(c.Token).Whoami(ctx); err != nil || who.User.Email != "ada@example.test" || c.User != "ada@example.test" {
		t.Fatalf("whoami with the stored token: %+v, %v; context user %q", who, err, c.User)
	}
	// The code is used up; the password works.
	_, err = login(false, "other password\n", func(o *LoginOptions) { o.Invite, o.PasswordStdin = ada.Invite.Code, true })
	if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "login failed: this invite code is not valid") {
		t.Fatalf("a used code: got %v; want unauthenticated saying the code is not valid", err)
	}
	if _, err := login(false, "first password\n", func(o *LoginOptions) { o.Email, o.PasswordStdin = "ada@example.test", true }); err != nil {
		t.Fatalf("password login: %v", err)
	}

	bob, err := admin.AdminUserAdd(ctx, api.UserAddRequest{Email: "bob@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := login(false, "bob's password\n", func(o *LoginOptions) { o.Invite, o.PasswordStdin = bob.Invite.Code, true }); err != nil {
		t.Fatalf("login --invite --password-stdin: %v", err)
	}
	if c, _ := cfg.Context("dev"); c.User != "bob@example.test" {
		t.Fatalf("context user: got %q; want bob", c.User)
	}
}

// TestLoginPromptSaysForWhom: `gpuaas login` prompted a bare "Password:",
// not saying which account on which server it was for. Against a real
// controld, on a terminal: the prompt names the email and the context.
func TestLoginPromptSaysForWhom(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	cfg := devConfig(t, env.NATSURL)
	ios, in, _, errOut := cmdtest.Streams(true)
	in.WriteString(controldtest.AdminEmail + "\n" + controldtest.AdminPassword + "\n")
	opts := &LoginOptions{IO: ios, Now: time.Now,
		Config: func() (*clientconfig.Config, error) { return cfg, nil },
		Active: func() (clientconfig.Active, error) { return cfg.Active(clientconfig.Overrides{Context: "dev"}), nil },
		Client: func() (*api.Client, error) { return env.AnonClient(), nil },
	}
	if err := loginRun(t.Context(), opts); err != nil {
		t.Fatalf("login: %v\n%s", err, errOut)
	}
	want := "Email: Password for " + controldtest.AdminEmail + " on dev (" + env.NATSURL + "): "
	if got := errOut.String(); !strings.HasPrefix(got, want) || !strings.Contains(got, "Logged in as "+controldtest.AdminEmail) {
		t.Errorf("got stderr %q; want it to start %q and report the login", got, want)
	}
}

// TestLoginInviteStdinTwoLines is the regression test of "`login --invite
// --password-stdin` takes both lines as the password": given the new
// password twice, as the terminal asks it, the password is the line, not
// both lines; two different lines, or more lines, change nothing.
func TestLoginInviteStdinTwoLines(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	cfg := devConfig(t, env.NATSURL)
	login := func(input string, edit func(*LoginOptions)) error {
		ios, in, _, _ := cmdtest.Streams(false)
		in.WriteString(input)
		opts := &LoginOptions{IO: ios, Now: time.Now, PasswordStdin: true,
			Config: func() (*clientconfig.Config, error) { return cfg, nil },
			Active: func() (clientconfig.Active, error) { return cfg.Active(clientconfig.Overrides{Context: "dev"}), nil },
			Client: func() (*api.Client, error) { return env.AnonClient(), nil },
		}
		edit(opts)
		return loginRun(ctx, opts)
	}
	eve, err := admin.AdminUserAdd(ctx, api.UserAddRequest{Email: "eve@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	invite := func(o *LoginOptions) { o.Invite = eve.Invite.Code }
	var fe *cmdutil.FlagError
	if err := login("one password\nanother one\n", invite); !errors.As(err, &fe) || !strings.Contains(err.Error(), "differ") {
		t.Fatalf("two different lines: %v; want a usage error saying they differ", err)
	}
	if err := login("a\na\na\n", invite); !errors.As(err, &fe) || !strings.Contains(err.Error(), "one line, got 3 lines") {
		t.Fatalf("three lines: %v; want a usage error", err)
	}
	if err := login("the password\r\nthe password\r\n", invite); err != nil {
		t.Fatalf("the password twice: %v", err)
	}
	if err := login("the password\n", func(o *LoginOptions) { o.Email = "eve@example.test" }); err != nil {
		t.Fatalf("logging in with the line: %v; want the password set to the line alone", err)
	}
}
