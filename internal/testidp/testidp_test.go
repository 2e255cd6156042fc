package testidp_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gpuaas/gpuaas/internal/testidp"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// setup discovers the IdP with go-oidc, as controld and the CLI do, and
// returns an oauth2 config for its public client.
func setup(t *testing.T, idp *testidp.IdP) (*oidc.Provider, *oauth2.Config) {
	t.Helper()
	p, err := oidc.NewProvider(t.Context(), idp.URL)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	ep := p.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInParams
	if ep.DeviceAuthURL == "" {
		t.Fatal("discovery has no device_authorization_endpoint")
	}
	return p, &oauth2.Config{ClientID: idp.ClientID, Endpoint: ep, Scopes: []string{oidc.ScopeOpenID, "email"}}
}

func verify(t *testing.T, p *oidc.Provider, idp *testidp.IdP, tok *oauth2.Token, now func() time.Time) *oidc.IDToken {
	t.Helper()
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: idp.ClientID, Now: now}).Verify(t.Context(), raw)
	if err != nil {
		t.Fatalf("verify ID token: %v", err)
	}
	return idt
}

func oauthErrorCode(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func TestDeviceFlow(t *testing.T) {
	clock := testutil.NewClock(time.Now())
	idp := testidp.New(t, testidp.Options{Now: clock.Now})
	p, cfg := setup(t, idp)
	ctx := t.Context()

	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		t.Fatalf("device authorization: %v", err)
	}
	if got, _ := idp.NextDeviceCode(ctx); got != da.UserCode {
		t.Fatalf("NextDeviceCode got %q; want the code the device got, %q", got, da.UserCode)
	}
	// Pending until approved: one poll, straight to the token endpoint.
	_, err = cfg.Exchange(ctx, "", oauth2.SetAuthURLParam("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
		oauth2.SetAuthURLParam("device_code", da.DeviceCode))
	if code := oauthErrorCode(err); code != "authorization_pending" {
		t.Fatalf("poll before approval got %v; want authorization_pending", err)
	}
	if err := idp.Approve(da.UserCode, "dana"); err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatalf("device access token: %v", err)
	}
	idt := verify(t, p, idp, tok, clock.Now)
	var claims struct{ Email string }
	_ = idt.Claims(&claims)
	if idt.Subject != "dana" || claims.Email != "dana@"+testidp.EmailDomain {
		t.Fatalf("got subject %q email %q; want dana", idt.Subject, claims.Email)
	}
	// A device code yields tokens once.
	_, err = cfg.DeviceAccessToken(ctx, da)
	if code := oauthErrorCode(err); code != "invalid_grant" {
		t.Fatalf("second redemption got %v; want invalid_grant", err)
	}
}

func TestDeviceFlowRefusals(t *testing.T) {
	clock := testutil.NewClock(time.Now())
	idp := testidp.New(t, testidp.Options{Now: clock.Now})
	_, cfg := setup(t, idp)
	tests := []struct {
		name   string
		settle func(userCode string) error
		want   string
	}{
		{"denied", idp.Deny, "access_denied"},
		{"expired early", idp.Expire, "expired_token"},
		{"expired by the clock", func(string) error { clock.Advance(11 * time.Minute); return nil }, "expired_token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			da, err := cfg.DeviceAuth(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.settle(da.UserCode); err != nil {
				t.Fatal(err)
			}
			_, err = cfg.DeviceAccessToken(t.Context(), da)
			if code := oauthErrorCode(err); code != tt.want {
				t.Fatalf("got %v; want %s", err, tt.want)
			}
		})
	}
	if err := idp.Approve("NOPE-NOPE", "dana"); err == nil {
		t.Fatal("approving an unknown code got nil; want an error")
	}
}

// browse follows /authorize like a browser, up to the redirect, and
// returns the redirect's query.
func browse(t *testing.T, authURL string) url.Values {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize got %s; want a redirect", resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(loc.String(), "http://127.0.0.1:5555/callback?") {
		t.Fatalf("redirected to %s; want the loopback redirect_uri", loc)
	}
	return loc.Query()
}

func TestCodeFlowWithPKCE(t *testing.T) {
	idp := testidp.New(t, testidp.Options{})
	p, cfg := setup(t, idp)
	cfg.RedirectURL = "http://127.0.0.1:5555/callback"
	ctx := t.Context()
	idp.LoginAs("erin")

	verifier := oauth2.GenerateVerifier()
	q := browse(t, cfg.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier), oidc.Nonce("n0nce")))
	if q.Get("state") != "st4te" || q.Get("code") == "" {
		t.Fatalf("redirect query %v; want a code and the state", q)
	}
	// A wrong verifier burns the code: it cannot be redeemed afterwards.
	_, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier()))
	if code := oauthErrorCode(err); code != "invalid_grant" {
		t.Fatalf("exchange with a wrong verifier got %v; want invalid_grant", err)
	}
	if _, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); oauthErrorCode(err) != "invalid_grant" {
		t.Fatalf("exchange after a failed one got %v; want invalid_grant", err)
	}

	q = browse(t, cfg.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier), oidc.Nonce("n0nce")))
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if idt := verify(t, p, idp, tok, time.Now); idt.Subject != "erin" || idt.Nonce != "n0nce" {
		t.Fatalf("got subject %q nonce %q; want erin, n0nce", idt.Subject, idt.Nonce)
	}

	// Without PKCE, or when nobody logs in, the browser comes back with an error.
	if q := browse(t, cfg.AuthCodeURL("s")); q.Get("error") != "invalid_request" {
		t.Fatalf("authorize without PKCE got %v; want invalid_request", q)
	}
	idp.LoginAs("")
	if q := browse(t, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier))); q.Get("error") != "access_denied" || q.Get("state") != "s" {
		t.Fatalf("authorize with nobody logging in got %v; want access_denied with the state", q)
	}
}

func TestTokenEditsAndForeignClient(t *testing.T) {
	idp := testidp.New(t, testidp.Options{})
	p, cfg := setup(t, idp)
	ctx := context.Background()
	idp.SetTokenEdits(map[string]any{"aud": "another-client"})
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = idp.Approve(da.UserCode, "dana")
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if _, err := p.Verifier(&oidc.Config{ClientID: idp.ClientID}).Verify(ctx, raw); err == nil ||
		!strings.Contains(err.Error(), "audience") {
		t.Fatalf("verify an edited token got %v; want an audience error", err)
	}
	foreign := *cfg
	foreign.ClientID = "someone-else"
	if _, err := foreign.DeviceAuth(ctx); oauthErrorCode(err) != "invalid_client" {
		t.Fatalf("device authorization for an unknown client got %v; want invalid_client", err)
	}
}

// TestGrantTypesAndAuthorizeFailures: GrantTypes limits what the token
// endpoint serves and, unless AdvertisedGrantTypes says otherwise, what
// discovery lists; the device endpoint answers either way (as Dex's
// does). FailAuthorize redirects back with the error given.
func TestGrantTypesAndAuthorizeFailures(t *testing.T) {
	idp := testidp.New(t, testidp.Options{GrantTypes: []string{"authorization_code"},
		AdvertisedGrantTypes: []string{"authorization_code", testidp.GrantDeviceCode}})
	p, cfg := setup(t, idp)
	var meta struct {
		GrantTypes []string `json:"grant_types_supported"`
	}
	if err := p.Claims(&meta); err != nil || strings.Join(meta.GrantTypes, " ") != "authorization_code "+testidp.GrantDeviceCode {
		t.Fatalf("discovery grant_types_supported %v (%v); want the advertised ones", meta.GrantTypes, err)
	}
	da, err := cfg.DeviceAuth(t.Context())
	if err != nil {
		t.Fatalf("device authorization: %v", err)
	}
	if got := idp.DeviceRequests(); got != 1 {
		t.Fatalf("DeviceRequests got %d; want 1", got)
	}
	_ = idp.Approve(da.UserCode, "dana")
	if _, err := cfg.DeviceAccessToken(t.Context(), da); oauthErrorCode(err) != "unsupported_grant_type" {
		t.Fatalf("device token with the grant off got %v; want unsupported_grant_type", err)
	}

	plain := testidp.New(t, testidp.Options{GrantTypes: []string{"authorization_code"}})
	if p, _ := setup(t, plain); p.Claims(&meta) != nil || strings.Join(meta.GrantTypes, " ") != "authorization_code" {
		t.Fatalf("discovery grant_types_supported %v; want GrantTypes by default", meta.GrantTypes)
	}

	cfg.RedirectURL = "http://127.0.0.1:5555/callback"
	idp.LoginAs("erin")
	idp.FailAuthorize("invalid_scope", "scope x is not allowed")
	verifier := oauth2.GenerateVerifier()
	q := browse(t, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)))
	if q.Get("error") != "invalid_scope" || q.Get("error_description") != "scope x is not allowed" || q.Get("state") != "s" || q.Get("code") != "" {
		t.Fatalf("authorize with FailAuthorize got %v; want invalid_scope with its description and the state, no code", q)
	}
	idp.FailAuthorize("", "")
	if q := browse(t, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier))); q.Get("code") == "" {
		t.Fatalf("authorize after FailAuthorize(\"\") got %v; want a code", q)
	}
}
