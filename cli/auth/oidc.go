package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	oauthapi "github.com/cli/oauth/api"
	"github.com/cli/oauth/device"
	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/gpuaas/gpuaas/internal/api"
)

// idpTimeout bounds each request to the identity provider.
const idpTimeout = 30 * time.Second

// oidcLogin gets an ID token from the server's identity provider (device
// flow, or the browser with --web) and exchanges it for a session.
func oidcLogin(ctx context.Context, opts *LoginOptions, p api.OIDCProvider, client *api.Client) (*api.LoginResponse, error) {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: idpTimeout}
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, hc), p.Issuer)
	if err != nil {
		return nil, &api.Error{Code: api.CodeUnavailable, Message: fmt.Sprintf("identity provider %s: %v", p.Issuer, err),
			Hint: "check that the identity provider is reachable from this machine"}
	}
	var idToken, nonce string // the device flow has no nonce
	if opts.Web {
		idToken, nonce, err = webLogin(ctx, opts, hc, provider, p)
	} else {
		idToken, err = deviceLogin(ctx, opts, hc, provider, p)
	}
	if err != nil {
		return nil, err
	}
	resp, err := client.Exchange(ctx, api.ExchangeRequest{IDToken: idToken, Nonce: nonce})
	var e *api.Error
	if errors.As(err, &e) && (e.Code == api.CodeUnauthenticated || e.Code == api.CodeForbidden) {
		// The server's message says what was wrong with the token; "run
		// gpuaas login" would not help, that is what the user just did.
		return nil, &api.Error{Code: e.Code, Message: "login failed: " + e.Message, Hint: e.Hint}
	}
	return resp, err
}

// deviceLogin runs the OAuth device flow (RFC 8628) through cli/oauth:
// print the code and where to enter it, then poll the token endpoint.
func deviceLogin(ctx context.Context, opts *LoginOptions, hc *http.Client, provider *oidc.Provider, p api.OIDCProvider) (string, error) {
	ep := provider.Endpoint()
	if ep.DeviceAuthURL == "" {
		return "", noDeviceFlow(p, "its discovery document names no device_authorization_endpoint")
	}
	// An IdP may serve the device endpoint and still refuse the grant at
	// the token endpoint (Dex with the grant turned off): discovery says
	// so before the user is sent to enter a code that cannot work.
	if grants, ok := discoveredGrants(provider); ok && !slices.Contains(grants, grantDeviceCode) {
		return "", noDeviceFlow(p, fmt.Sprintf("its discovery lists the grant types %s, not %s",
			strings.Join(grants, ", "), grantDeviceCode))
	}
	post := &idTokenCatcher{ctx: ctx, hc: hc}
	code, err := device.RequestCode(post, ep.DeviceAuthURL, p.ClientID, p.Scopes)
	var oe *oauthapi.Error
	switch {
	case err == nil:
	case post.lastError() == "invalid_client" || errors.As(err, &oe) && oe.Code == "invalid_client":
		return "", unknownClient(p, "its device endpoint answered "+post.lastAnswer())
	case errors.Is(err, device.ErrUnsupported):
		// cli/oauth keeps only that the endpoint said no; the catcher
		// kept what it said.
		return "", noDeviceFlow(p, "its device endpoint answered "+post.lastAnswer())
	case errors.As(err, &oe) && refusesGrant(oe.Code):
		return "", noDeviceFlow(p, "its device endpoint answered "+post.lastAnswer())
	default:
		return "", idpError("ask the identity provider for a device code", err)
	}
	lifetime := time.Duration(code.ExpiresIn) * time.Second
	w := opts.IO.ErrOut
	fmt.Fprintf(w, "First copy your one-time code: %s\n", code.UserCode)
	fmt.Fprintf(w, "Then open %s in a browser, on this machine or any other, and enter it.\n", code.VerificationURI)
	if code.VerificationURIComplete != "" {
		fmt.Fprintf(w, "(Or open %s, which has the code in it.)\n", code.VerificationURIComplete)
	}
	stop := waitNotice(opts, "you to approve the code at the identity provider", "the code", lifetime)
	_, err = device.Wait(ctx, post, ep.TokenURL, device.WaitOptions{ClientID: p.ClientID, DeviceCode: code})
	stop()
	switch {
	case err == nil:
	case errors.As(err, &oe) && oe.Code == "access_denied":
		return "", &api.Error{Code: api.CodeUnauthenticated, Message: "login failed: the identity provider denied the request",
			Hint: "run `gpuaas login` again and approve the request"}
	case errors.As(err, &oe) && oe.Code == "expired_token",
		errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil: // cli/oauth stops polling at expires_in
		return "", &api.Error{Code: api.CodeUnauthenticated,
			Message: fmt.Sprintf("login failed: the code %s expired before it was approved", code.UserCode),
			Hint:    fmt.Sprintf("run `gpuaas login` again and enter the new code within %s", lifetime)}
	case errors.As(err, &oe) && refusesGrant(oe.Code):
		return "", noDeviceFlow(p, "its token endpoint answered "+oe.Code)
	case errors.As(err, &oe) && oe.Code == "invalid_client":
		return "", unknownClient(p, "its token endpoint answered "+post.lastAnswer())
	case ctx.Err() != nil:
		return "", ctx.Err()
	default:
		return "", idpError("wait for the identity provider", err)
	}
	return post.idToken()
}

// grantDeviceCode is the device flow's grant type (RFC 8628 §3.4).
const grantDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"

// discoveredGrants reads grant_types_supported from the IdP's discovery
// document; ok is false when it has none (the field is optional, and
// many providers that omit it do serve the device grant).
func discoveredGrants(provider *oidc.Provider) (grants []string, ok bool) {
	var meta struct {
		GrantTypes []string `json:"grant_types_supported"`
	}
	if err := provider.Claims(&meta); err != nil || len(meta.GrantTypes) == 0 {
		return nil, false
	}
	return meta.GrantTypes, true
}

// refusesGrant reports whether an OAuth error code means the IdP does not
// let this client use the device grant at all (as opposed to a failed
// attempt that a retry could fix).
func refusesGrant(code string) bool {
	return code == "unsupported_grant_type" || code == "unauthorized_client"
}

// noDeviceFlow is the error for an IdP that will not run the device flow
// for the server's client: why, and that --web does not need it.
func noDeviceFlow(p api.OIDCProvider, why string) error {
	return &api.Error{Code: api.CodeInvalidArgument,
		Message: fmt.Sprintf("identity provider %s does not offer the device flow to client %s: %s", p.Issuer, p.ClientID, why),
		Hint: "log in with a browser on this machine: `gpuaas login --web`; or have the IdP's administrator " +
			"allow the device grant for client " + p.ClientID + " (docs/oidc.md)"}
}

// unknownClient is the error for an IdP that does not know the client id
// the server announced.
func unknownClient(p api.OIDCProvider, why string) error {
	return &api.Error{Code: api.CodeUnauthenticated,
		Message: fmt.Sprintf("login failed: identity provider %s does not accept client %s: %s", p.Issuer, p.ClientID, why),
		Hint: fmt.Sprintf("the IdP's administrator must register %s as a public client (docs/oidc.md), "+
			"or controld's --oidc-client-id must name the client the IdP has", p.ClientID)}
}

func idpError(op string, err error) error {
	var oe *oauthapi.Error
	if errors.As(err, &oe) {
		return &api.Error{Code: api.CodeUnauthenticated, Message: fmt.Sprintf("login failed: %s: the identity provider answered %v", op, oe)}
	}
	return &api.Error{Code: api.CodeUnavailable, Message: fmt.Sprintf("%s: %v", op, err),
		Hint: "check that the identity provider is reachable from this machine"}
}

// idTokenCatcher is cli/oauth's HTTP client: it sends the requests with
// the command's context and keeps the id_token of a successful token
// response, which cli/oauth's AccessToken does not carry.
type idTokenCatcher struct {
	ctx context.Context
	hc  *http.Client

	// mu protects the following.
	mu    sync.Mutex
	token string
	// errCode and answer are the last error response's OAuth error code
	// and a summary of it ("HTTP 401 invalid_client: Unknown client").
	errCode, answer string
}

// PostForm implements cli/oauth's httpClient.
func (c *idTokenCatcher) PostForm(u string, values url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, u, strings.NewReader(values.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var tok struct {
		IDToken     string `json:"id_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &tok)
	c.mu.Lock()
	switch {
	case resp.StatusCode == http.StatusOK && tok.IDToken != "":
		c.token = tok.IDToken
	case resp.StatusCode != http.StatusOK:
		c.errCode = tok.Error
		c.answer = strings.TrimSpace(fmt.Sprintf("HTTP %d %s", resp.StatusCode, tok.Error))
		if tok.Description != "" {
			c.answer += ": " + tok.Description
		}
	}
	c.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// lastError is the OAuth error code of the last error response.
func (c *idTokenCatcher) lastError() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errCode
}

// lastAnswer summarizes the last error response.
func (c *idTokenCatcher) lastAnswer() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answer == "" {
		return "no"
	}
	return c.answer
}

func (c *idTokenCatcher) idToken() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == "" {
		return "", errNoIDToken
	}
	return c.token, nil
}

var errNoIDToken = &api.Error{Code: api.CodeUnauthenticated, Message: "login failed: the identity provider returned no ID token",
	Hint: "the server's OIDC scopes must include openid"}
