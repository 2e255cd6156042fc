// Package testidp is an OpenID provider for tests, served on 127.0.0.1:
// discovery, a JWKS with one RSA key, the device authorization endpoint
// (RFC 8628), an authorization endpoint for the code flow with PKCE S256
// (RFC 7636), and a token endpoint for both grants that issues RS256 ID
// tokens. Tests play the user: they approve, deny or expire a device code
// (Approve, Deny, Expire) and choose who logs in at /authorize (LoginAs).
package testidp

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// DefaultClientID is the public client the IdP knows unless told otherwise.
const DefaultClientID = "gpuaas-cli"

// KeyID names the IdP's signing key in its JWKS and in token headers.
const KeyID = "idp-key-1"

// EmailDomain is the domain of the email addresses the IdP vouches for:
// subject "dana" is dana@idp.example.test.
const EmailDomain = "idp.example.test"

// keys are generated once per test binary: RSA key generation is slow
// under the race detector.
var keys = sync.OnceValues(func() (known, other *rsa.PrivateKey) {
	return mustRSA(), mustRSA()
})

func mustRSA() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// OtherKey is an RSA key the IdP does not publish, for forged tokens.
func OtherKey() *rsa.PrivateKey {
	_, other := keys()
	return other
}

// Options adjust an IdP.
type Options struct {
	// ClientID is the one public client the IdP serves (default
	// DefaultClientID).
	ClientID string
	// Now is the IdP's clock (default time.Now): it stamps ID tokens and
	// ages device and authorization codes.
	Now func() time.Time
	// Interval is the polling interval the device endpoint asks for, in
	// seconds (default 1).
	Interval int
	// DeviceCodeTTL is how long a device code may be approved (default
	// 10 minutes).
	DeviceCodeTTL time.Duration
	// TokenTTL is the life of the ID tokens issued (default 5 minutes).
	TokenTTL time.Duration
	// GrantTypes are the grants the token endpoint serves to the client
	// (default: authorization_code and the device code grant); others get
	// unsupported_grant_type. The device authorization endpoint answers
	// either way, as Dex's does when its device grant is turned off.
	GrantTypes []string
	// AdvertisedGrantTypes is discovery's grant_types_supported (default
	// GrantTypes).
	AdvertisedGrantTypes []string
}

// GrantDeviceCode is the device flow's grant type (RFC 8628 §3.4).
const GrantDeviceCode = grantDeviceCode

// IdP is a running provider.
type IdP struct {
	// URL is the issuer, "http://127.0.0.1:port".
	URL      string
	ClientID string
	Key      *rsa.PrivateKey
	opts     Options

	// pending receives each user code as a device asks for one.
	pending chan string

	// mu protects the following.
	mu      sync.Mutex
	devices map[string]*deviceGrant // by device code
	users   map[string]*deviceGrant // by user code
	codes   map[string]*authCode    // authorization codes
	loginAs string                  // who /authorize logs in; "" denies
	edits   map[string]any          // applied to every ID token issued
	// authFail, when set, is the error /authorize redirects back with.
	authFail url.Values
	// deviceRequests counts device authorization requests.
	deviceRequests int
}

// New serves an IdP until the test ends.
func New(t testing.TB, opts Options) *IdP {
	t.Helper()
	if opts.ClientID == "" {
		opts.ClientID = DefaultClientID
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Interval == 0 {
		opts.Interval = 1
	}
	if opts.DeviceCodeTTL == 0 {
		opts.DeviceCodeTTL = 10 * time.Minute
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = 5 * time.Minute
	}
	if opts.GrantTypes == nil {
		opts.GrantTypes = []string{"authorization_code", grantDeviceCode}
	}
	if opts.AdvertisedGrantTypes == nil {
		opts.AdvertisedGrantTypes = opts.GrantTypes
	}
	known, _ := keys()
	p := &IdP{ClientID: opts.ClientID, Key: known, opts: opts, pending: make(chan string, 16),
		devices: map[string]*deviceGrant{}, users: map[string]*deviceGrant{}, codes: map[string]*authCode{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /keys", p.jwks)
	mux.HandleFunc("POST /device/code", p.deviceAuthorization)
	mux.HandleFunc("GET /device", p.verificationPage)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	// The URL is set before the server starts, so handlers read it after
	// the write (the race detector sees no order through the network).
	srv := httptest.NewUnstartedServer(mux)
	p.URL = "http://" + srv.Listener.Addr().String()
	srv.Start()
	t.Cleanup(srv.Close)
	return p
}

func (p *IdP) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.URL,
		"authorization_endpoint":                p.URL + "/authorize",
		"device_authorization_endpoint":         p.URL + "/device/code",
		"token_endpoint":                        p.URL + "/token",
		"jwks_uri":                              p.URL + "/keys",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 p.opts.AdvertisedGrantTypes,
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "email", "profile"},
		"token_endpoint_auth_methods_supported": []string{"none"},
	})
}

func (p *IdP) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &p.Key.PublicKey, KeyID: KeyID, Algorithm: string(jose.RS256), Use: "sig"},
	}})
}

// LoginAs makes /authorize log subject in and redirect with a code; ""
// makes it deny every request (error=access_denied).
func (p *IdP) LoginAs(subject string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loginAs = subject
}

// FailAuthorize makes /authorize redirect back with the OAuth error code
// and description (RFC 6749 §4.1.2.1) instead of logging anyone in, as an
// IdP does for a scope it refuses or an internal failure; "" undoes it.
func (p *IdP) FailAuthorize(code, description string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.authFail = nil
	if code != "" {
		p.authFail = url.Values{"error": {code}, "error_description": {description}}
	}
}

// DeviceRequests is how many device codes were asked for so far.
func (p *IdP) DeviceRequests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deviceRequests
}

// SetTokenEdits changes every ID token issued from now on: a claim set to
// nil is removed, any other value replaces the claim (e.g. {"aud": "x"}
// for an IdP that issues tokens to another client).
func (p *IdP) SetTokenEdits(edits map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.edits = edits
}

// Claims returns a valid ID token's claims for subject at now, with edits.
func (p *IdP) Claims(now time.Time, subject string, edits map[string]any) map[string]any {
	c := map[string]any{
		"iss":            p.URL,
		"sub":            subject,
		"aud":            p.ClientID,
		"iat":            now.Unix(),
		"exp":            now.Add(p.opts.TokenTTL).Unix(),
		"email":          subject + "@" + EmailDomain,
		"email_verified": true,
		"name":           "Dana " + subject,
	}
	for k, v := range edits {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// IDToken is an ID token for subject, issued now by the IdP's clock and
// signed with its key, with edits to the claims.
func (p *IdP) IDToken(t testing.TB, subject string, edits map[string]any) string {
	t.Helper()
	tok, err := Sign(p.Key, KeyID, p.Claims(p.opts.Now(), subject, edits))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Sign signs claims as a compact RS256 JWT with key under kid.
func Sign(key *rsa.PrivateKey, kid string, claims map[string]any) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// issue signs the ID token of a grant: the IdP's clock, its current edits,
// and the nonce of the authorization request if there was one.
func (p *IdP) issue(subject, nonce string) (string, error) {
	p.mu.Lock()
	edits := p.edits
	p.mu.Unlock()
	c := p.Claims(p.opts.Now(), subject, nil)
	if nonce != "" {
		c["nonce"] = nonce
	}
	for k, v := range edits {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return Sign(p.Key, KeyID, c)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError writes an RFC 6749 §5.2 error response.
func oauthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

func randomString(n int) string {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
