package testidp

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// authCode is an authorization code waiting to be redeemed.
type authCode struct {
	subject     string
	redirectURI string
	challenge   string // S256 of the verifier
	nonce       string
	openid      bool
	expiresAt   time.Time
}

// authCodeTTL is how long an authorization code may be redeemed.
const authCodeTTL = time.Minute

// authorize serves the authorization endpoint. Only public clients with
// PKCE S256 and loopback redirects (RFC 8252 §7.3) are served; the
// person logging in is whoever LoginAs named.
func (p *IdP) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || q.Get("client_id") != p.ClientID || !loopback(redirect) {
		// Never redirect to an unchecked URI: tell the person instead.
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back := func(params url.Values) {
		params.Set("state", q.Get("state"))
		u := *redirect
		u.RawQuery = params.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		back(url.Values{"error": {"unsupported_response_type"}})
		return
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		back(url.Values{"error": {"invalid_request"}, "error_description": {"PKCE with S256 is required"}})
		return
	}
	p.mu.Lock()
	subject, fail := p.loginAs, p.authFail
	code := randomString(32)
	if subject != "" && fail == nil {
		p.codes[code] = &authCode{subject: subject, redirectURI: redirect.String(), challenge: q.Get("code_challenge"),
			nonce: q.Get("nonce"), openid: slices.Contains(strings.Fields(q.Get("scope")), "openid"),
			expiresAt: p.opts.Now().Add(authCodeTTL)}
	}
	p.mu.Unlock()
	if fail != nil {
		back(url.Values{"error": fail["error"], "error_description": fail["error_description"]})
		return
	}
	if subject == "" {
		back(url.Values{"error": {"access_denied"}, "error_description": {"the user denied the request"}})
		return
	}
	back(url.Values{"code": {code}})
}

func loopback(u *url.URL) bool {
	if u.Scheme != "http" {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// codeToken answers the authorization_code grant with PKCE (RFC 7636 §4.6).
func (p *IdP) codeToken(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	p.mu.Lock()
	c, ok := p.codes[f.Get("code")]
	delete(p.codes, f.Get("code")) // one try per code, right or wrong
	p.mu.Unlock()
	switch {
	case !ok:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or used authorization code")
	case !p.opts.Now().Before(c.expiresAt):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the authorization code has expired")
	case f.Get("redirect_uri") != c.redirectURI:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri does not match the authorization request")
	case !verifierMatches(f.Get("code_verifier"), c.challenge):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code challenge")
	default:
		p.writeTokens(w, c.subject, c.nonce, c.openid)
	}
}

func verifierMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

// token serves the token endpoint for public clients.
func (p *IdP) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	client := r.PostForm.Get("client_id")
	if user, _, ok := r.BasicAuth(); ok {
		client = user
	}
	if client != p.ClientID {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client")
		return
	}
	grant := r.PostForm.Get("grant_type")
	if !slices.Contains(p.opts.GrantTypes, grant) {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "unsupported grant_type")
		return
	}
	switch grant {
	case grantDeviceCode:
		p.deviceToken(w, r)
	case "authorization_code":
		p.codeToken(w, r)
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "unsupported grant_type")
	}
}
