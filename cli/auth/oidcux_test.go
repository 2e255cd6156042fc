package auth

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/testidp"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// These are the regression tests of what a new user hit logging in
// through a real identity provider (docs/oidc.md).

// watchedWriter is a stderr the test reads while the login still writes.
type watchedWriter struct {
	// mu protects buf.
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *watchedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestLoginWebSaysItWaitsAndThatCtrlCStops: a wrong password at the IdP
// keeps the browser on the login page and nothing comes back. The CLI
// says what it waits for, until when, that Ctrl-C stops it, and keeps
// saying how long is left; Ctrl-C (the context ending) stops it with
// nothing stored.
func TestLoginWebSaysItWaitsAndThatCtrlCStops(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	o.idp.LoginAs("erin")
	ios, _, _, _ := cmdtest.Streams(false)
	stderr := &watchedWriter{}
	ios.ErrOut = stderr
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	opened := false
	opts := &LoginOptions{IO: ios, Now: time.Now, Web: true, WaitReminder: 20 * time.Millisecond,
		Config:      func() (*clientconfig.Config, error) { return o.cfg, nil },
		Active:      func() (clientconfig.Active, error) { return o.cfg.Active(clientconfig.Overrides{Context: "dev"}), nil },
		Client:      func() (*api.Client, error) { return o.env.AnonClient(), nil },
		OpenBrowser: func(string) error { opened = true; return nil }, // the person never gets past the IdP's page
	}
	done := make(chan error, 1)
	go func() { done <- loginRun(ctx, opts) }()
	testutil.EventuallyWithin(t, 30*time.Second, "the login to say it still waits", func() bool {
		return strings.Contains(stderr.String(), "Still waiting for the browser")
	})
	interrupt() // Ctrl-C
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("login --web did not stop when interrupted; stderr:\n%s", stderr.String())
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted login got %v; want context.Canceled (printed as \"interrupted\")", err)
	}
	if !opened {
		t.Error("the browser was never opened; want it opened before waiting")
	}
	got := stderr.String()
	for _, want := range []string{
		"Waiting for the browser to come back to http://127.0.0.1:",
		"this login expires in 5m0s (at ",
		"Press Ctrl-C to stop.",
		"If the browser shows an error from the identity provider instead",
		"left; Ctrl-C stops).",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr %q; want it to contain %q", got, want)
		}
	}
	if ctx, _ := o.cfg.Context("dev"); ctx.Token != "" {
		t.Errorf("an interrupted login stored token %q; want none", ctx.Token)
	}
}

// TestLoginWebStopsAtOnceWhenTheIdPRefusesTheClient: an IdP that does not
// know the server's client id (or its loopback redirect) shows an error
// page and never redirects. The CLI reads that page before opening the
// browser and stops with the IdP's words, instead of waiting 5 minutes.
func TestLoginWebStopsAtOnceWhenTheIdPRefusesTheClient(t *testing.T) {
	t.Parallel()
	idp := testidp.New(t, testidp.Options{})
	idp.LoginAs("erin")
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		OIDC: identity.OIDCConfig{Issuer: idp.URL, ClientID: "not-registered-at-the-idp"}})
	o := &oidcEnv{env: env, idp: idp, cfg: devConfig(t, env.NATSURL)}
	opened := false
	stderr, err := o.login(t, func(opts *LoginOptions) {
		opts.Web, opts.OpenBrowser = true, func(string) error { opened = true; return nil }
	})
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeUnauthenticated {
		t.Fatalf("login --web with a client the IdP does not know got %v; want unauthenticated\n%s", err, stderr)
	}
	for _, want := range []string{"refused the login request of client not-registered-at-the-idp", "(HTTP 400)",
		"unknown client or redirect_uri"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("got %q; want it to contain %q", e.Message, want)
		}
	}
	if !strings.Contains(e.Hint, "public client") || !strings.Contains(e.Hint, "docs/oidc.md") {
		t.Errorf("hint %q; want the client settings the IdP needs", e.Hint)
	}
	if opened || strings.Contains(stderr, "Waiting for") {
		t.Errorf("browser opened %v, stderr %q; want the login stopped before sending anyone to the browser", opened, stderr)
	}
}

// TestLoginWebStopsAtOnceOnTheIdPsErrorRedirect: an IdP that redirects
// back with error=... (here a refused scope) ends the login at once with
// the IdP's error and description.
func TestLoginWebStopsAtOnceOnTheIdPsErrorRedirect(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	o.idp.LoginAs("erin")
	o.idp.FailAuthorize("invalid_scope", "scope profile is not allowed for this client")
	opened := make(chan error, 1)
	stderr, err := o.login(t, func(opts *LoginOptions) { opts.Web, opts.OpenBrowser = true, browser(t, opened) })
	want := "login failed: the identity provider answered invalid_scope scope profile is not allowed for this client"
	if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v; want unauthenticated saying %q\n%s", err, want, stderr)
	}
	if err := <-opened; err != nil {
		t.Fatalf("browser: %v", err)
	}
	if ctx, _ := o.cfg.Context("dev"); ctx.Token != "" {
		t.Errorf("a refused login stored token %q; want none", ctx.Token)
	}
}

// TestLoginDeviceWithoutTheGrantSuggestsWeb: an IdP whose discovery does
// not list the device grant is not asked for a code (Dex serves the
// device endpoint even with the grant off, and refused it only at the
// token endpoint); one that lists it but refuses it for the client at the
// token endpoint ends the same way. Both suggest --web, not `gpuaas login`.
func TestLoginDeviceWithoutTheGrantSuggestsWeb(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		opts             testidp.Options
		wantMsg          string
		wantCodeRequests int
	}{
		{name: "not in discovery", opts: testidp.Options{GrantTypes: []string{"authorization_code", "refresh_token"}},
			wantMsg:          "its discovery lists the grant types authorization_code, refresh_token, not " + testidp.GrantDeviceCode,
			wantCodeRequests: 0},
		{name: "refused at the token endpoint", opts: testidp.Options{GrantTypes: []string{"authorization_code"},
			AdvertisedGrantTypes: []string{"authorization_code", testidp.GrantDeviceCode}},
			wantMsg:          "its token endpoint answered unsupported_grant_type",
			wantCodeRequests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			idp := testidp.New(t, tt.opts)
			env := controldtest.Start(t, controldtest.Options{NoNodes: true,
				OIDC: identity.OIDCConfig{Issuer: idp.URL, ClientID: idp.ClientID}})
			o := &oidcEnv{env: env, idp: idp, cfg: devConfig(t, env.NATSURL)}
			stderr, err := o.login(t, nil)
			var e *api.Error
			if !errors.As(err, &e) || e.Code != api.CodeInvalidArgument {
				t.Fatalf("login got %v; want invalid_argument\n%s", err, stderr)
			}
			if want := "does not offer the device flow to client " + idp.ClientID + ": " + tt.wantMsg; !strings.Contains(e.Message, want) {
				t.Errorf("got %q; want it to contain %q", e.Message, want)
			}
			if !strings.Contains(e.Hint, "`gpuaas login --web`") {
				t.Errorf("hint %q; want it to suggest `gpuaas login --web`", e.Hint)
			}
			var printed bytes.Buffer
			cmdutil.PrintError(&printed, "gpuaas login", err)
			if strings.Contains(printed.String(), "hint: run `gpuaas login`\n") {
				t.Errorf("printed %q; want no plain `gpuaas login` hint", printed.String())
			}
			if got := idp.DeviceRequests(); got != tt.wantCodeRequests {
				t.Errorf("the IdP was asked for %d device codes; want %d", got, tt.wantCodeRequests)
			}
			if got := strings.Contains(stderr, "one-time code"); got != (tt.wantCodeRequests > 0) {
				t.Errorf("stderr %q: printed a code %v; want %v", stderr, got, tt.wantCodeRequests > 0)
			}
		})
	}
}

// TestLoginDeviceSaysHowLongTheCodeLives: the device flow says it waits,
// for how long the code lives, and that Ctrl-C stops it.
func TestLoginDeviceSaysHowLongTheCodeLives(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	o.settleNextDevice(t, func(c string) error { return o.idp.Approve(c, "dana") })
	stderr, err := o.login(t, nil)
	if err != nil {
		t.Fatalf("login: %v\n%s", err, stderr)
	}
	want := "Waiting for you to approve the code at the identity provider; the code expires in 10m0s (at "
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, "Press Ctrl-C to stop.") {
		t.Errorf("stderr %q; want it to contain %q and how to stop", stderr, want)
	}
}

// TestLoginOIDCSaysWhichEmailClaimIsMissing: a token without the email
// claim is not met with "verify your email": the message names the
// missing claim and the scopes the server asks for. An unverified address
// names email_verified.
func TestLoginOIDCSaysWhichEmailClaimIsMissing(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	tests := []struct {
		name     string
		edits    map[string]any
		wantMsg  string
		wantHint string
	}{
		{name: "no email claim", edits: map[string]any{"email": nil, "email_verified": nil},
			wantMsg:  "the identity provider's ID token has no email claim",
			wantHint: "put the email claim in ID tokens for client " + o.idp.ClientID + " (this server asks for the scopes openid email profile)"},
		{name: "email not verified", edits: map[string]any{"email_verified": false},
			wantMsg:  "has not verified your email address gus@" + testidp.EmailDomain + " (its ID token says email_verified: false)",
			wantHint: "verify your email with your identity provider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o.idp.SetTokenEdits(tt.edits)
			o.settleNextDevice(t, func(c string) error { return o.idp.Approve(c, "gus") })
			stderr, err := o.login(t, nil)
			var e *api.Error
			if !errors.As(err, &e) || e.Code != api.CodeForbidden {
				t.Fatalf("login got %v; want forbidden\n%s", err, stderr)
			}
			if !strings.Contains(e.Message, tt.wantMsg) || !strings.Contains(e.Hint, tt.wantHint) {
				t.Errorf("got %q (hint %q); want %q (hint %q)", e.Message, e.Hint, tt.wantMsg, tt.wantHint)
			}
			if ctx, _ := o.cfg.Context("dev"); ctx.Token != "" {
				t.Errorf("a refused login stored token %q; want none", ctx.Token)
			}
		})
	}
}

// TestFirstOIDCUserWithoutProjectIsToldWhoCanAddThem: a person's first
// OIDC login creates their account in no project, and their context's
// default project is not theirs. Instead of "project dev not found" they
// read that they have no project yet and who can add them; once in a
// project, a project that is not theirs is plainly not found again.
func TestFirstOIDCUserWithoutProjectIsToldWhoCanAddThem(t *testing.T) {
	t.Parallel()
	o := startOIDC(t)
	o.settleNextDevice(t, func(c string) error { return o.idp.Approve(c, "fay") })
	if stderr, err := o.login(t, nil); err != nil {
		t.Fatalf("login: %v\n%s", err, stderr)
	}
	ctx, _ := o.cfg.Context("dev")
	email := "fay@" + testidp.EmailDomain
	hint := "a project's owner, or a platform admin, can add you: `gpuaas project add-member PROJECT --email " + email + "`"
	tests := []struct {
		name, project string
		want          api.Code
		wantMsg       string
	}{
		{name: "default project that does not exist", project: "dev", want: api.CodeNotFound,
			wantMsg: `project "dev" not found: you (` + email + `) are not a member of any project yet`},
		{name: "a project of others", project: o.env.Project.Name, want: api.CodeNotFound,
			wantMsg: `project "` + o.env.Project.Name + `" not found: you (` + email + `) are not a member of any project yet`},
		{name: "no project", project: "", want: api.CodeInvalidArgument,
			wantMsg: "no project given, and you (" + email + ") are not a member of any project yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// project members with no argument: the context's project.
			_, err := o.env.Client(ctx.Token, api.WithProject(tt.project)).ProjectMembers(t.Context(), "")
			var e *api.Error
			if !errors.As(err, &e) || e.Code != tt.want || e.Message != tt.wantMsg || !strings.Contains(e.Hint, hint) {
				t.Fatalf("project members in %q got %#v; want %s %q with the hint %q", tt.project, err, tt.want, tt.wantMsg, hint)
			}
		})
	}
	// An owner adds fay to their project: "dev" is now just not found.
	if _, err := o.env.Client(o.env.AdminToken).ProjectAddMember(t.Context(),
		api.AddMemberRequest{Project: o.env.Project.Name, Email: email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	_, err := o.env.Client(ctx.Token, api.WithProject("dev")).ProjectMembers(t.Context(), "")
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeNotFound || e.Message != `project "dev" not found` {
		t.Fatalf("project members in dev as a member of another project got %v; want the plain not found", err)
	}
	if _, err := o.env.Client(ctx.Token).AllocList(t.Context(), api.AllocListRequest{}); err != nil {
		t.Fatalf("alloc list in the project fay was added to: %v", err)
	}
}

// TestLoginDeviceWithAnUnknownClientSaysSo: an IdP that does not know the
// client id the server announced answers the device request with
// invalid_client; the login stops there, saying so, instead of a code
// that cannot work or a hint to run `gpuaas login` again.
func TestLoginDeviceWithAnUnknownClientSaysSo(t *testing.T) {
	t.Parallel()
	idp := testidp.New(t, testidp.Options{})
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		OIDC: identity.OIDCConfig{Issuer: idp.URL, ClientID: "not-registered-at-the-idp"}})
	o := &oidcEnv{env: env, idp: idp, cfg: devConfig(t, env.NATSURL)}
	stderr, err := o.login(t, nil)
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeUnauthenticated {
		t.Fatalf("login with a client the IdP does not know got %v; want unauthenticated\n%s", err, stderr)
	}
	want := "identity provider " + idp.URL + " does not accept client not-registered-at-the-idp: its device endpoint answered HTTP 400 invalid_client: unknown client"
	if !strings.Contains(e.Message, want) || !strings.Contains(e.Hint, "register not-registered-at-the-idp as a public client") {
		t.Errorf("got %q (hint %q); want %q and how to register the client", e.Message, e.Hint, want)
	}
	if strings.Contains(stderr, "one-time code") {
		t.Errorf("stderr %q; want no code printed", stderr)
	}
}
