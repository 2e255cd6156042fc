package auth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys"
	"github.com/gpuaas/gpuaas/internal/testidp"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// oidcEnv is a real controld that trusts a test IdP, and a CLI config
// whose context "dev" points at it.
type oidcEnv struct {
	env   *controldtest.Env
	idp   *testidp.IdP
	clock *testutil.Clock // the IdP's
	cfg   *clientconfig.Config
}

func startOIDC(t *testing.T) *oidcEnv {
	t.Helper()
	clock := testutil.NewClock(time.Now())
	idp := testidp.New(t, testidp.Options{Now: clock.Now})
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		OIDC: identity.OIDCConfig{Issuer: idp.URL, ClientID: idp.ClientID}})
	return &oidcEnv{env: env, idp: idp, clock: clock, cfg: devConfig(t, env.NATSURL)}
}

// devConfig is a config in a temp dir whose context "dev" is server. It
// reads no environment, so parallel tests may use it.
func devConfig(t *testing.T, server string) *clientconfig.Config {
	t.Helper()
	cfg, err := clientconfig.Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetContext("dev", clientconfig.Context{Server: server})
	return cfg
}

// login runs `gpuaas login` with piped streams (the device flow needs no
// terminal) and returns its stderr.
func (o *oidcEnv) login(t *testing.T, edit func(*LoginOptions)) (string, error) {
	t.Helper()
	ios, _, out, errOut := cmdtest.Streams(false)
	opts := &LoginOptions{IO: ios, Now: time.Now,
		Config: func() (*clientconfig.Config, error) { return o.cfg, nil },
		Active: func() (clientconfig.Active, error) { return o.cfg.Active(clientconfig.Overrides{Context: "dev"}), nil },
		Client: func() (*api.Client, error) { return o.env.AnonClient(), nil },
	}
	if edit != nil {
		edit(opts)
	}
	err := loginRun(t.Context(), opts)
	if out.Len() > 0 {
		t.Errorf("login wrote %q to stdout; want everything on stderr", out.String())
	}
	return errOut.String(), err
}

// settleNextDevice plays the person at the verification page: it waits
// for the CLI to ask for a code and then does settle with it.
func (o *oidcEnv) settleNextDevice(t *testing.T, settle func(userCode string) error) <-chan string {
	codes := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code, err := o.idp.NextDeviceCode(ctx)
		if err != nil {
			t.Error(err)
			close(codes)
			return
		}
		if err := settle(code); err != nil {
			t.Error(err)
		}
		codes <- code
	}()
	return codes
}

func TestLoginDeviceFlow(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	codes := o.settleNextDevice(t, func(c string) error { return o.idp.Approve(c, "dana") })
	stderr, err := o.login(t, nil)
	if err != nil {
		t.Fatalf("login: %v\n%s", err, stderr)
	}
	code := <-codes
	for _, want := range []string{"one-time code: " + code, o.idp.URL + "/device", "Logged in as dana@" + testidp.EmailDomain} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q; want it to contain %q", stderr, want)
		}
	}
	ctx, _ := o.cfg.Context("dev")
	who, err := o.env.Client(ctx.Token).Whoami(t.Context())
	if err != nil {
		t.Fatalf("whoami with the stored token: %v", err)
	}
	if who.User.Email != "dana@"+testidp.EmailDomain || who.User.Provider != "oidc" || ctx.UserID != who.User.ID {
		t.Fatalf("whoami got %+v, context user id %s; want the new oidc user dana", who.User, ctx.UserID)
	}
	// The session signed an SSH certificate, as a password login's does.
	cert, err := sshkeys.ReadCert(sshkeys.For(filepath.Dir(o.cfg.Path()), "dev").Cert)
	if err != nil {
		t.Fatalf("read the SSH certificate: %v", err)
	}
	if len(cert.ValidPrincipals) != 1 || cert.ValidPrincipals[0] != who.User.ID || cert.KeyId != who.User.Email {
		t.Fatalf("got a certificate for %v (key id %s); want one for %s", cert.ValidPrincipals, cert.KeyId, who.User.ID)
	}
}

func TestLoginDeviceFlowRefusals(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	tests := []struct {
		name   string
		before func() // changes the IdP
		settle func(o *oidcEnv) func(string) error
		want   []string
	}{
		{name: "denied at the IdP", settle: func(o *oidcEnv) func(string) error { return o.idp.Deny },
			want: []string{"login failed: the identity provider denied the request"}},
		{name: "device code expired", settle: func(o *oidcEnv) func(string) error { return o.idp.Expire },
			want: []string{"login failed: the code ", "expired before it was approved"}},
		{name: "ID token for another client",
			before: func() { o.idp.SetTokenEdits(map[string]any{"aud": "another-client"}) },
			want:   []string{"login failed: the identity provider's token is not valid for this server", "another-client"}},
		{name: "ID token already expired", // the IdP's clock is an hour behind controld's
			before: func() { o.clock.Advance(-time.Hour) },
			want:   []string{"login failed: the identity provider's token has expired"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o.idp.SetTokenEdits(nil)
			o.clock.Advance(time.Since(o.clock.Now())) // back to the wall clock
			if tt.before != nil {
				tt.before()
			}
			settle := func(c string) error { return o.idp.Approve(c, "eve") }
			if tt.settle != nil {
				settle = tt.settle(o)
			}
			o.settleNextDevice(t, settle)
			stderr, err := o.login(t, nil)
			if !errors.Is(err, api.ErrUnauthenticated) {
				t.Fatalf("login got %v; want unauthenticated\n%s", err, stderr)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("got %q; want it to mention %q", err.Error(), want)
				}
			}
			if ctx, _ := o.cfg.Context("dev"); ctx.Token != "" {
				t.Errorf("a refused login stored token %q; want none", ctx.Token)
			}
		})
	}
	// Nothing was created for the refused logins.
	if _, err := identity.UserByEmail(t.Context(), o.env.Server.Pool(), "eve@"+testidp.EmailDomain); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("user eve after refused logins: got %v; want not found", err)
	}
}

// browser plays a browser on this machine: it follows the authorization
// URL through the IdP to the CLI's loopback redirect.
func browser(t *testing.T, done chan<- error) func(string) error {
	return func(u string) error {
		go func() {
			resp, err := http.Get(u)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done <- err
		}()
		return nil
	}
}

func TestLoginWeb(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	o.idp.LoginAs("erin")
	opened := make(chan error, 1)
	stderr, err := o.login(t, func(opts *LoginOptions) { opts.Web, opts.OpenBrowser = true, browser(t, opened) })
	if err != nil {
		t.Fatalf("login --web: %v\n%s", err, stderr)
	}
	if err := <-opened; err != nil {
		t.Fatalf("browser: %v", err)
	}
	if !strings.Contains(stderr, o.idp.URL+"/authorize?") || !strings.Contains(stderr, "code_challenge_method=S256") {
		t.Errorf("stderr %q; want the authorization URL printed, with PKCE", stderr)
	}
	ctx, _ := o.cfg.Context("dev")
	if who, err := o.env.Client(ctx.Token).Whoami(t.Context()); err != nil || who.User.Email != "erin@"+testidp.EmailDomain {
		t.Fatalf("whoami got %+v, %v; want erin", who, err)
	}
}

func TestLoginWebRefusals(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	// forged comes back to the loopback redirect with a state of its own,
	// as a request that did not come from this login would.
	forged := func(u string) error {
		au, err := url.Parse(u)
		if err != nil {
			return err
		}
		cb, _ := url.Parse(au.Query().Get("redirect_uri"))
		cb.RawQuery = url.Values{"code": {"stolen"}, "state": {"not-the-state"}}.Encode()
		go func() {
			if resp, err := http.Get(cb.String()); err == nil {
				resp.Body.Close()
			}
		}()
		return nil
	}
	tests := []struct {
		name    string
		loginAs string
		browse  func(string) error
		want    string
	}{
		{name: "denied at the IdP", browse: browser(t, make(chan error, 1)), want: "login failed: the identity provider denied the request"},
		{name: "state mismatch", loginAs: "erin", browse: forged, want: "login failed: the browser came back with a state this login did not send"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o.idp.LoginAs(tt.loginAs)
			stderr, err := o.login(t, func(opts *LoginOptions) { opts.Web, opts.OpenBrowser = true, tt.browse })
			if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("login --web got %v; want unauthenticated saying %q\n%s", err, tt.want, stderr)
			}
			if ctx, _ := o.cfg.Context("dev"); ctx.Token != "" {
				t.Errorf("a refused login stored token %q; want none", ctx.Token)
			}
		})
	}
}

// TestLoginWebNonce: --web sends a nonce and the server checks that the
// ID token carries it.
func TestLoginWebNonce(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	o.idp.LoginAs("erin")
	for _, edit := range []map[string]any{{"nonce": "not-the-nonce"}, {"nonce": nil}} {
		o.idp.SetTokenEdits(edit)
		stderr, err := o.login(t, func(opts *LoginOptions) { opts.Web, opts.OpenBrowser = true, browser(t, make(chan error, 1)) })
		if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "nonce") {
			t.Fatalf("token edited with %v: got %v; want unauthenticated about the nonce\n%s", edit, err, stderr)
		}
		if !strings.Contains(stderr, "nonce=") {
			t.Fatalf("stderr %q; want the authorization URL to carry a nonce", stderr)
		}
	}
	o.idp.SetTokenEdits(nil)
	if stderr, err := o.login(t, func(opts *LoginOptions) { opts.Web, opts.OpenBrowser = true, browser(t, make(chan error, 1)) }); err != nil {
		t.Fatalf("login --web: %v\n%s", err, stderr)
	}
}

func TestLoginWebWithoutIdP(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	o := &oidcEnv{env: env, cfg: devConfig(t, env.NATSURL)}
	_, err := o.login(t, func(opts *LoginOptions) { opts.Web = true })
	if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "no identity provider") {
		t.Fatalf("login --web against a local-only server got %v; want invalid_argument", err)
	}
	// Without --web, a local-only server means a password, which needs a
	// terminal or --password-stdin.
	_, err = o.login(t, nil)
	if err == nil || !strings.Contains(err.Error(), "use --password-stdin") {
		t.Fatalf("login with piped stdin against a local-only server got %v; want the --password-stdin usage error", err)
	}
}

func TestSystemBrowser(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "browser")
	got := filepath.Join(dir, "opened")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s|%s' \"$1\" \"$2\" > "+got+".tmp && mv "+got+".tmp "+got+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, env, want string
	}{
		{"URL appended", script + " --new-window", "--new-window|http://idp/authorize?x=1"},
		{"%s replaced, first of a list", script + " %s --flag:/no/such/browser", "http://idp/authorize?x=1|--flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(got)
			open := systemBrowser(tt.env)
			if open == nil {
				t.Fatal("systemBrowser got nil; want a command")
			}
			if err := open("http://idp/authorize?x=1"); err != nil {
				t.Fatal(err)
			}
			var b []byte
			testutil.EventuallyWithin(t, 10*time.Second, "the browser command to run", func() bool {
				var err error
				b, err = os.ReadFile(got)
				return err == nil
			})
			if string(b) != tt.want {
				t.Fatalf("browser got %q; want %q", b, tt.want)
			}
		})
	}
	t.Setenv("PATH", t.TempDir())
	if systemBrowser("") != nil {
		t.Error("systemBrowser with no $BROWSER and no opener on PATH got a command; want nil (print the URL only)")
	}
	if err := systemBrowser("/no/such/browser")("http://x"); err == nil {
		t.Error("a $BROWSER that does not exist got nil; want an error to report")
	}
}
