package testidp

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// grantDeviceCode is the device flow's grant type (RFC 8628 §3.4).
const grantDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"

// deviceGrant is one device authorization in progress.
type deviceGrant struct {
	userCode  string
	scopes    []string
	expiresAt time.Time
	state     deviceState
	subject   string // once approved
}

type deviceState int

const (
	devicePending deviceState = iota
	deviceApproved
	deviceDenied
	deviceExpired
	deviceUsed
)

// deviceAuthorization answers RFC 8628 §3.1–3.2.
func (p *IdP) deviceAuthorization(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.deviceRequests++
	p.mu.Unlock()
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if r.PostForm.Get("client_id") != p.ClientID {
		oauthError(w, http.StatusBadRequest, "invalid_client", "unknown client")
		return
	}
	scopes := strings.Fields(r.PostForm.Get("scope"))
	deviceCode := randomString(32)
	userCode := randomString(4) + "-" + randomString(4)
	p.mu.Lock()
	g := &deviceGrant{userCode: userCode, scopes: scopes, expiresAt: p.opts.Now().Add(p.opts.DeviceCodeTTL)}
	p.devices[deviceCode] = g
	p.users[userCode] = g
	p.mu.Unlock()
	select {
	case p.pending <- userCode:
	default: // nobody is watching; the code can still be found by Approve
	}
	verify := p.URL + "/device"
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code":               deviceCode,
		"user_code":                 userCode,
		"verification_uri":          verify,
		"verification_uri_complete": verify + "?user_code=" + userCode,
		"expires_in":                int(p.opts.DeviceCodeTTL / time.Second),
		"interval":                  p.opts.Interval,
	})
}

// verificationPage is where a person would type the user code.
func (p *IdP) verificationPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "Enter the code shown by your device.")
}

// NextDeviceCode waits for a device to ask for a code and returns its user
// code, as the person at the verification page would read it.
func (p *IdP) NextDeviceCode(ctx context.Context) (string, error) {
	select {
	case c := <-p.pending:
		return c, nil
	case <-ctx.Done():
		return "", fmt.Errorf("wait for a device code: %w", ctx.Err())
	}
}

// Approve logs subject in on the device that holds userCode.
func (p *IdP) Approve(userCode, subject string) error {
	return p.settle(userCode, func(g *deviceGrant) { g.state, g.subject = deviceApproved, subject })
}

// Deny refuses the device that holds userCode (access_denied).
func (p *IdP) Deny(userCode string) error {
	return p.settle(userCode, func(g *deviceGrant) { g.state = deviceDenied })
}

// Expire ends userCode's life early (expired_token).
func (p *IdP) Expire(userCode string) error {
	return p.settle(userCode, func(g *deviceGrant) { g.state = deviceExpired })
}

func (p *IdP) settle(userCode string, fn func(*deviceGrant)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.users[userCode]
	if !ok || g.state != devicePending {
		return fmt.Errorf("no pending device code %q", userCode)
	}
	fn(g)
	return nil
}

// deviceToken answers the device_code grant (RFC 8628 §3.4–3.5).
func (p *IdP) deviceToken(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	g, ok := p.devices[r.PostForm.Get("device_code")]
	if ok && g.state == devicePending && !p.opts.Now().Before(g.expiresAt) {
		g.state = deviceExpired
	}
	var state deviceState
	var subject string
	if ok {
		state, subject = g.state, g.subject
		if state == deviceApproved {
			g.state = deviceUsed // a device code yields tokens once
		}
	}
	p.mu.Unlock()
	switch {
	case !ok || state == deviceUsed:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or used device code")
	case state == devicePending:
		oauthError(w, http.StatusBadRequest, "authorization_pending", "the user has not approved the code yet")
	case state == deviceDenied:
		oauthError(w, http.StatusBadRequest, "access_denied", "the user denied the request")
	case state == deviceExpired:
		oauthError(w, http.StatusBadRequest, "expired_token", "the device code has expired")
	default:
		p.writeTokens(w, subject, "", slices.Contains(g.scopes, "openid"))
	}
}

// writeTokens answers a successful grant; the ID token comes only with
// the openid scope, as with a real provider.
func (p *IdP) writeTokens(w http.ResponseWriter, subject, nonce string, openid bool) {
	resp := map[string]any{
		"access_token": randomString(32),
		"token_type":   "Bearer",
		"expires_in":   int(p.opts.TokenTTL / time.Second),
	}
	if openid {
		idt, err := p.issue(subject, nonce)
		if err != nil {
			oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
			return
		}
		resp["id_token"] = idt
	}
	writeJSON(w, http.StatusOK, resp)
}
