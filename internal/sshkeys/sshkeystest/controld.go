// Package sshkeystest stands in for controld's SSH endpoints (auth.login,
// auth.ssh_cert, ssh.cas) on a real NATS server, with real certificate
// authorities, for the CLI's tests.
package sshkeystest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/testutil"
	"github.com/gpuaas/gpuaas/internal/trustbundle"
)

// Identity of the one user the stand-in knows.
const (
	UserID    = "u-1"
	Email     = "ada@example.com"
	SessionID = "s-1"
)

// ServerKey is the stand-in's server key: it signs Token and the trust
// bundles of ssh.cas, as controld's session-token key does.
var ServerKey = func() ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}()

// Token is the user's session token: a JWT signed by ServerKey for UserID
// and SessionID.
var Token = func() string {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.RegisteredClaims{Subject: UserID, ID: SessionID,
		Issuer: "gpuaas-controld"}).SignedString(ServerKey)
	if err != nil {
		panic(err)
	}
	return tok
}()

// Controld answers the SSH endpoints.
type Controld struct {
	URL    string
	NC     *nats.Conn
	UserCA *sshcert.Authority
	HostCA *sshcert.Authority
	// Now is controld's clock.
	Now func() time.Time

	// mu protects the following.
	mu       sync.Mutex
	settings Settings
	signed   int
	handlers map[string]func(*nats.Msg) (any, error) // by endpoint
	subs     map[string]*nats.Subscription           // by endpoint
}

// Settings change what the endpoints answer.
type Settings struct {
	// SessionEnd bounds certificates (and is the login's expiry); TTL
	// caps them.
	SessionEnd time.Time
	TTL        time.Duration
	// Gateway is what ssh.cas publishes.
	Gateway string
	// HostCAs, when set, replaces the host CA lines ssh.cas returns.
	HostCAs []string
	// RetiredHostCAs are the fingerprints the bundle lists as retired.
	RetiredHostCAs []string
	// SignWith, when set, signs the trust bundle instead of ServerKey (a
	// forger's key).
	SignWith ed25519.PrivateKey
	// NoBundle leaves the trust bundle out of ssh.cas.
	NoBundle bool
	// IssuedAt, when set, dates the bundle (default: the clock).
	IssuedAt time.Time
	// BundleGateway, when set, is the gateway in the bundle instead of
	// Gateway: an answer whose unsigned fields disagree with its bundle.
	BundleGateway string
}

// Update changes the settings.
func (c *Controld) Update(fn func(*Settings)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(&c.settings)
}

func (c *Controld) current() Settings {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settings
}

// Start runs the stand-in on a fresh NATS server with JetStream.
func Start(t testing.TB, now func() time.Time) *Controld {
	t.Helper()
	b := testutil.NATS(t)
	// The CLI under test connects as it would to a real controld: with the
	// session token once logged in, with a key of its own before.
	b.ServeCallout(t, func(cr testutil.Credentials) (testutil.Grant, error) {
		switch {
		case cr.Token == Token:
			return testutil.Grant{Pub: []string{api.SubjectPrefix + ".>"},
				Sub: []string{api.UserInboxPrefix(UserID) + ".>", "gpuaas.user." + UserID + ".>"}}, nil
		case cr.Token != "":
			return testutil.Grant{}, errors.New("session refused")
		case cr.Nkey != "":
			return testutil.Grant{Pub: []string{api.SubjectPrefix + ".>"}, Sub: []string{api.InboxPrefix(cr.Nkey) + ".>"}}, nil
		}
		return testutil.Grant{}, errors.New("no credentials")
	})
	c := &Controld{URL: b.URL, NC: b.Connect(t), Now: now,
		settings: Settings{SessionEnd: now().Add(12 * time.Hour), TTL: 8 * time.Hour, Gateway: "localhost:2222"}}
	c.UserCA = newCA(t, api.CAUser)
	c.HostCA = newCA(t, api.CAHost)
	c.Handle(t, api.EndpointAuthLogin, c.login)
	c.Handle(t, api.EndpointSSHCert, c.sshCert)
	c.Handle(t, api.EndpointSSHCAs, c.AnswerSSHCAs)
	return c
}

func newCA(t testing.TB, name string) *sshcert.Authority {
	t.Helper()
	key, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	a, err := sshcert.New(name, key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Client returns an API client carrying token.
func (c *Controld) Client(token string) *api.Client {
	return api.NewClient(c.NC, api.WithToken(token))
}

// Signed counts the certificates signed so far.
func (c *Controld) Signed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signed
}

// Handle answers endpoint with fn, replacing what answered it before: its
// value as JSON, or its error (an *api.Error) as an error reply.
func (c *Controld) Handle(t testing.TB, endpoint string, fn func(*nats.Msg) (any, error)) {
	t.Helper()
	c.mu.Lock()
	_, subscribed := c.handlers[endpoint]
	if c.handlers == nil {
		c.handlers = map[string]func(*nats.Msg) (any, error){}
	}
	c.handlers[endpoint] = fn
	c.mu.Unlock()
	if subscribed {
		return
	}
	sub, err := c.NC.Subscribe(api.Subject(endpoint), func(m *nats.Msg) {
		c.mu.Lock()
		fn := c.handlers[endpoint]
		c.mu.Unlock()
		v, err := fn(m)
		reply := nats.NewMsg(m.Reply)
		if err != nil {
			apiErr, ok := err.(*api.Error)
			if !ok {
				apiErr = &api.Error{Code: api.CodeInternal, Message: err.Error()}
			}
			reply.Header.Set(micro.ErrorCodeHeader, "400")
			reply.Header.Set(micro.ErrorHeader, apiErr.Message)
			v = apiErr
		}
		reply.Data, _ = json.Marshal(v)
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	c.mu.Lock()
	if c.subs == nil {
		c.subs = map[string]*nats.Subscription{}
	}
	c.subs[endpoint] = sub
	c.mu.Unlock()
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
}

// Stop stops answering endpoint (Handle answers it again), so that
// another responder on the bus is the only one.
func (c *Controld) Stop(t testing.TB, endpoint string) {
	t.Helper()
	c.mu.Lock()
	sub := c.subs[endpoint]
	delete(c.subs, endpoint)
	delete(c.handlers, endpoint)
	c.mu.Unlock()
	if sub == nil {
		return
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (c *Controld) login(*nats.Msg) (any, error) {
	return api.LoginResponse{Token: Token, SessionID: SessionID, ExpiresAt: c.current().SessionEnd,
		User: api.User{ID: UserID, Email: Email, Role: "user", Provider: "local"}}, nil
}

func (c *Controld) sshCert(m *nats.Msg) (any, error) {
	if m.Header.Get(api.HeaderAuthorization) != "Bearer "+Token {
		return nil, &api.Error{Code: api.CodeUnauthenticated, Message: "session expired or revoked"}
	}
	if m.Header.Get(api.HeaderIdempotencyKey) == "" {
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: "no Idempotency-Key"}
	}
	var req api.SSHCertRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.PublicKey))
	if err != nil {
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	set := c.current()
	cert, err := c.UserCA.SignUser(pub, sshcert.UserCert{UserID: UserID, KeyID: Email, ValidBefore: set.SessionEnd, MaxTTL: set.TTL}, c.Now())
	if err != nil {
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	c.mu.Lock()
	c.signed++
	c.mu.Unlock()
	return api.SSHCertResponse{Certificate: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert))),
		ValidBefore: time.Unix(int64(cert.ValidBefore), 0).UTC()}, nil
}

// AnswerSSHCAs is the stand-in's ssh.cas handler, for tests that wrap it
// (Handle) and put it back.
func (c *Controld) AnswerSSHCAs(*nats.Msg) (any, error) {
	set := c.current()
	host := set.HostCAs
	if host == nil {
		host = c.HostCA.AuthorizedKeysLines()
	}
	resp := api.SSHCAsResponse{User: c.UserCA.AuthorizedKeysLines(), Host: host, Gateway: set.Gateway}
	if set.NoBundle {
		return resp, nil
	}
	key, at, gw := ServerKey, set.IssuedAt, set.Gateway
	if set.SignWith != nil {
		key = set.SignWith
	}
	if at.IsZero() {
		at = c.Now()
	}
	if set.BundleGateway != "" {
		gw = set.BundleGateway
	}
	var err error
	resp.Bundle, err = trustbundle.Sign(key, trustbundle.Statement{HostCAs: bareKeys(host),
		RetiredHostCAs: set.RetiredHostCAs, Gateway: gw, IssuedAt: at})
	return resp, err
}

// bareKeys turns cert-authority lines into plain authorized_keys lines, as
// controld's bundle lists them.
func bareKeys(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(l))
		if err != nil {
			out = append(out, l)
			continue
		}
		out = append(out, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))))
	}
	return out
}
