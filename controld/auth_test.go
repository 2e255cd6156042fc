package controld_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testidp"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// sessionKey reads controld's token signing key from its database, so that
// tests can forge tokens that pass the signature check and exercise the
// checks behind it.
func sessionKey(t *testing.T, env *controldtest.Env) ed25519.PrivateKey {
	t.Helper()
	var seed []byte
	if err := env.Server.Pool().QueryRow(t.Context(),
		`SELECT private_key FROM controld_keys WHERE name = 'session-token'`).Scan(&seed); err != nil {
		t.Fatalf("read session key: %v", err)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// claimsOf decodes a token's claims without verifying it.
func claimsOf(t *testing.T, token string) jwt.RegisteredClaims {
	t.Helper()
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		t.Fatalf("parse token: %v", err)
	}
	return c
}

func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

// flipPayloadChar changes one character in the middle of the payload
// segment, which always changes the decoded bytes.
func flipPayloadChar(token string) string {
	parts := strings.Split(token, ".")
	p := []byte(parts[1])
	i := len(p) / 2
	if p[i] == 'A' {
		p[i] = 'B'
	} else {
		p[i] = 'A'
	}
	parts[1] = string(p)
	return strings.Join(parts, ".")
}

// editPayload rewrites one claim and re-encodes the payload, keeping the
// original header and signature.
func editPayload(t *testing.T, token, claim string, value any) string {
	t.Helper()
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m[claim] = value
	raw, _ = json.Marshal(m)
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

// algNone re-encodes a token's claims unsigned, with alg "none".
func algNone(token string) string {
	parts := strings.Split(token, ".")
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	return header + "." + parts[1] + "."
}

func TestSessionTokens(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	key := sessionKey(t, env)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	admin := claimsOf(t, env.AdminToken)
	bobClaims := claimsOf(t, bobToken)
	_, otherKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forged := func(edit func(c *jwt.RegisteredClaims)) string {
		c := admin
		edit(&c)
		return sign(t, jwt.SigningMethodEdDSA, key, c)
	}
	// A session whose row says it ended, while its token still says it
	// has hours to live: the row wins.
	_, cutShort := env.AddUser(t, "carol@example.test", api.RoleUser)
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE sessions SET expires_at = now() - interval '1 minute' WHERE id = $1`,
		claimsOf(t, cutShort).ID); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		token   string
		wantErr string // substring of the message; "" means accepted
		wantID  string
	}{
		{name: "valid admin token", token: env.AdminToken, wantID: env.Admin.ID},
		{name: "valid user token", token: bobToken, wantID: bob.ID},
		{name: "no token", token: "", wantErr: "not logged in"},
		{name: "not a JWT", token: "not-a-token", wantErr: "invalid session token"},
		{name: "payload character flipped", token: flipPayloadChar(env.AdminToken), wantErr: "invalid session token"},
		{name: "sub changed without re-signing", token: editPayload(t, bobToken, "sub", env.Admin.ID), wantErr: "invalid session token"},
		{name: "exp extended without re-signing", token: editPayload(t, env.AdminToken, "exp", time.Now().Add(1000*time.Hour).Unix()), wantErr: "invalid session token"},
		{name: "alg none", token: algNone(env.AdminToken), wantErr: "invalid session token"},
		{name: "signed by another Ed25519 key", token: sign(t, jwt.SigningMethodEdDSA, otherKey, admin), wantErr: "invalid session token"},
		{name: "HS256 with the public key as secret", token: sign(t, jwt.SigningMethodHS256, []byte(key.Public().(ed25519.PublicKey)), admin), wantErr: "invalid session token"},
		// Signed with controld's real key: only the checks behind the
		// signature stand between these and access.
		{name: "foreign issuer", token: forged(func(c *jwt.RegisteredClaims) { c.Issuer = "someone-else" }), wantErr: "invalid session token"},
		{name: "no expiry", token: forged(func(c *jwt.RegisteredClaims) { c.ExpiresAt = nil }), wantErr: "invalid session token"},
		{name: "not yet valid", token: forged(func(c *jwt.RegisteredClaims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour)) }), wantErr: "invalid session token"},
		{name: "unknown session", token: forged(func(c *jwt.RegisteredClaims) { c.ID = ids.New(ids.Session) }), wantErr: "unknown session"},
		{name: "admin's session claimed by bob", token: forged(func(c *jwt.RegisteredClaims) { c.Subject = bob.ID }), wantErr: "invalid session token"},
		{name: "bob's session claimed as admin", token: forged(func(c *jwt.RegisteredClaims) { c.ID = bobClaims.ID }), wantErr: "invalid session token"},
		{name: "session row expired before the token", token: cutShort, wantErr: "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			who, err := env.Client(tt.token).Whoami(ctx)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("whoami got %v; want success", err)
				}
				if who.User.ID != tt.wantID {
					t.Fatalf("whoami got user %s; want %s", who.User.ID, tt.wantID)
				}
				return
			}
			if !errors.Is(err, api.ErrUnauthenticated) {
				t.Fatalf("whoami got %v (user %+v); want unauthenticated", err, who.User)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("whoami got message %q; want it to mention %q", err.Error(), tt.wantErr)
			}
		})
	}
}

func TestSessionTokenExpires(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now())
	env := controldtest.Start(t, controldtest.Options{Now: clock.Now, NoNodes: true})
	ctx := t.Context()
	c := env.Client(env.AdminToken)
	who, err := c.Whoami(ctx)
	if err != nil {
		t.Fatalf("whoami with a fresh token: %v", err)
	}
	if got, want := who.ExpiresAt, clock.Now().Add(12*time.Hour); got.Sub(want).Abs() > time.Second {
		t.Fatalf("expires_at got %v; want %v (SessionTTL after login)", got, want)
	}
	clock.Advance(12*time.Hour - time.Minute)
	if _, err := c.Whoami(ctx); err != nil {
		t.Fatalf("whoami a minute before expiry got %v; want success", err)
	}
	clock.Advance(2 * time.Minute)
	_, err = c.Whoami(ctx)
	if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("whoami after SessionTTL got %v; want unauthenticated saying the session expired", err)
	}
	// Logging in again works on the same clock.
	if _, err := env.Client(env.Login(t, controldtest.AdminEmail, controldtest.AdminPassword)).Whoami(ctx); err != nil {
		t.Fatalf("whoami after logging in again: %v", err)
	}
}

func TestLoginFailuresLookAlike(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	anon := env.AnonClient()
	sessions := func() int { return count(t, env, `SELECT count(*) FROM sessions`) }
	before := sessions()

	_, wrongPassword := anon.Login(ctx, api.LoginRequest{Email: controldtest.AdminEmail, Password: "wrong password"})
	_, unknownEmail := anon.Login(ctx, api.LoginRequest{Email: "nobody@example.test", Password: "wrong password"})
	_, wrongCase := anon.Login(ctx, api.LoginRequest{Email: strings.ToUpper(controldtest.AdminEmail), Password: "wrong password"})
	for _, err := range []error{wrongPassword, unknownEmail, wrongCase} {
		if !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("login got %v; want unauthenticated", err)
		}
	}
	var a, b, c *api.Error
	errors.As(wrongPassword, &a)
	errors.As(unknownEmail, &b)
	errors.As(wrongCase, &c)
	if *a != *b || *a != *c {
		t.Fatalf("wrong password got %+v, unknown email got %+v, other case got %+v; want the same error", *a, *b, *c)
	}
	if got := sessions(); got != before {
		t.Fatalf("failed logins left %d sessions; want %d", got, before)
	}
	// Email matching ignores case for a right password.
	if _, err := anon.Login(ctx, api.LoginRequest{Email: strings.ToUpper(controldtest.AdminEmail),
		Password: controldtest.AdminPassword}); err != nil {
		t.Fatalf("login with upper-case email got %v; want success", err)
	}
}

func TestLogoutRevokesSession(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	_, token := env.AddUser(t, "bob@example.test", api.RoleUser)
	other := env.Login(t, "bob@example.test", "another good password")
	c := env.Client(token)
	who, err := c.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Logout(ctx)
	if err != nil {
		t.Fatalf("logout: %v", err)
	}
	if out.SessionID != who.SessionID {
		t.Fatalf("logout revoked %s; want %s", out.SessionID, who.SessionID)
	}
	_, err = c.Whoami(ctx)
	if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "logged out") {
		t.Fatalf("whoami after logout got %v; want unauthenticated saying it was logged out", err)
	}
	if _, err := c.Logout(ctx); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("second logout got %v; want unauthenticated", err)
	}
	if _, err := c.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "after-logout"}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("mutation after logout got %v; want unauthenticated", err)
	}
	// Only that session ended.
	if _, err := env.Client(other).Whoami(ctx); err != nil {
		t.Fatalf("whoami with bob's other session got %v; want success", err)
	}
	if n := count(t, env, `SELECT count(*) FROM sessions WHERE revoked_at IS NOT NULL`); n != 1 {
		t.Fatalf("revoked sessions: got %d; want 1", n)
	}
}

// count runs a count(*) query against controld's database.
func count(t *testing.T, env *controldtest.Env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Server.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// idToken signs claims as an ID token with key under kid.
func idToken(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	s, err := testidp.Sign(key, kid, claims)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rowCounts is what an exchange may create.
type rowCounts struct{ users, sessions, audit, outbox int }

func countRows(t *testing.T, env *controldtest.Env) rowCounts {
	t.Helper()
	return rowCounts{
		users:    count(t, env, `SELECT count(*) FROM users`),
		sessions: count(t, env, `SELECT count(*) FROM sessions`),
		audit:    count(t, env, `SELECT count(*) FROM audit_logs`),
		outbox:   count(t, env, `SELECT count(*) FROM outbox_events`),
	}
}

func TestOIDCExchange(t *testing.T) {
	t.Parallel()
	idp := testidp.New(t, testidp.Options{})
	clock := testutil.NewClock(time.Now())
	env := controldtest.Start(t, controldtest.Options{Now: clock.Now, NoNodes: true,
		OIDC: identity.OIDCConfig{Issuer: idp.URL, ClientID: testidp.DefaultClientID}})
	ctx := t.Context()
	anon := env.AnonClient()

	before := countRows(t, env)
	first, err := anon.Exchange(ctx, api.ExchangeRequest{IDToken: idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "dana", nil))})
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if first.User.Provider != "oidc" || first.User.Email != "dana@idp.example.test" || first.User.Role != api.RoleUser {
		t.Fatalf("exchange got user %+v; want a new oidc user dana@idp.example.test with role user", first.User)
	}
	who, err := env.Client(first.Token).Whoami(ctx)
	if err != nil {
		t.Fatalf("whoami with the exchanged token: %v", err)
	}
	if who.User.ID != first.User.ID || who.SessionID != first.SessionID {
		t.Fatalf("whoami got user %s session %s; want %s %s", who.User.ID, who.SessionID, first.User.ID, first.SessionID)
	}
	if got, want := countRows(t, env), (rowCounts{before.users + 1, before.sessions + 1, before.audit + 1, before.outbox + 1}); got != want {
		t.Fatalf("after the first exchange got %+v; want %+v", got, want)
	}

	clock.Advance(time.Minute)
	second, err := anon.Exchange(ctx, api.ExchangeRequest{IDToken: idToken(t, idp.Key, testidp.KeyID,
		idp.Claims(clock.Now(), "dana", map[string]any{"email": "dana.renamed@idp.example.test"}))})
	if err != nil {
		t.Fatalf("second exchange: %v", err)
	}
	if second.User.ID != first.User.ID || second.SessionID == first.SessionID {
		t.Fatalf("second exchange got user %s session %s; want user %s with a new session", second.User.ID, second.SessionID, first.User.ID)
	}
	if n := count(t, env, `SELECT count(*) FROM users WHERE provider = 'oidc'`); n != 1 {
		t.Fatalf("oidc users after two exchanges: got %d; want 1", n)
	}
	// An OIDC user has no password: a password login reads like any other
	// failed one.
	_, oidcLogin := anon.Login(ctx, api.LoginRequest{Email: first.User.Email, Password: "any password at all"})
	_, unknown := anon.Login(ctx, api.LoginRequest{Email: "nobody@example.test", Password: "any password at all"})
	if !errors.Is(oidcLogin, api.ErrUnauthenticated) || oidcLogin.Error() != unknown.Error() {
		t.Fatalf("password login of an oidc user got %v; want the unknown-email error %v", oidcLogin, unknown)
	}

	unknownKey := testidp.OtherKey()
	tests := []struct {
		name    string
		token   func() string
		advance time.Duration // of controld's clock, before exchanging
		want    error
		wantMsg string
	}{
		{name: "wrong audience", want: api.ErrUnauthenticated, wantMsg: "not valid for this server: it was issued to client another-client", token: func() string {
			return idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "eve", map[string]any{"aud": "another-client"}))
		}},
		{name: "wrong issuer", want: api.ErrUnauthenticated, token: func() string {
			return idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "eve", map[string]any{"iss": "https://idp.invalid"}))
		}},
		{name: "unknown key", want: api.ErrUnauthenticated, token: func() string {
			return idToken(t, unknownKey, "unknown-key", idp.Claims(clock.Now(), "eve", nil))
		}},
		{name: "unknown key under the known kid", want: api.ErrUnauthenticated, token: func() string {
			return idToken(t, unknownKey, testidp.KeyID, idp.Claims(clock.Now(), "eve", nil))
		}},
		{name: "tampered payload", want: api.ErrUnauthenticated, token: func() string {
			return flipPayloadChar(idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "eve", nil)))
		}},
		{name: "email not verified", want: api.ErrForbidden, token: func() string {
			return idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "eve", map[string]any{"email_verified": false}))
		}},
		{name: "no email", want: api.ErrForbidden, token: func() string {
			return idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "eve", map[string]any{"email": nil}))
		}},
		{name: "email of a local user", want: api.ErrConflict, token: func() string {
			return idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "eve", map[string]any{"email": controldtest.AdminEmail}))
		}},
		{
			// Valid by the wall clock, expired by controld's.
			name: "expired", advance: 6 * time.Minute, want: api.ErrUnauthenticated, wantMsg: "expired",
			token: func() string { return idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "eve", nil)) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := countRows(t, env)
			tok := tt.token()
			clock.Advance(tt.advance)
			resp, err := anon.Exchange(ctx, api.ExchangeRequest{IDToken: tok})
			if !errors.Is(err, tt.want) {
				t.Fatalf("exchange got %v (user %+v); want %v", err, resp.User, tt.want)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("exchange got message %q; want it to mention %q", err.Error(), tt.wantMsg)
			}
			// Nothing but the refusal's own audit row.
			want := before
			want.audit++
			if got := countRows(t, env); got != want {
				t.Fatalf("refused exchange left %+v; want %+v", got, want)
			}
			wantRefusalAudited(t, env, "auth.exchange_refused", api.CodeOf(err))
		})
	}
}

// wantRefusalAudited checks that the latest audit row records a refusal
// of action with code.
func wantRefusalAudited(t *testing.T, env *controldtest.Env, action string, code api.Code) {
	t.Helper()
	var gotAction, gotCode string
	if err := env.Server.Pool().QueryRow(t.Context(), `SELECT action, detail->>'code' FROM audit_logs ORDER BY id DESC LIMIT 1`).
		Scan(&gotAction, &gotCode); err != nil {
		t.Fatal(err)
	}
	if gotAction != action || gotCode != string(code) {
		t.Fatalf("latest audit row: got %s with code %s; want %s with code %s", gotAction, gotCode, action, code)
	}
}

func TestOIDCExchangeNotConfigured(t *testing.T) {
	t.Parallel()
	idp := testidp.New(t, testidp.Options{})
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	before := countRows(t, env)
	_, err := env.AnonClient().Exchange(t.Context(), api.ExchangeRequest{
		IDToken: idToken(t, idp.Key, testidp.KeyID, idp.Claims(time.Now(), "dana", nil))})
	if !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("exchange without OIDC got %v; want invalid_argument", err)
	}
	want := before
	want.audit++ // the refusal
	if got := countRows(t, env); got != want {
		t.Fatalf("refused exchange left %+v; want %+v", got, want)
	}
	wantRefusalAudited(t, env, "auth.exchange_refused", api.CodeInvalidArgument)
}

// Regression: concurrent first exchanges for one subject raced to create
// the user, and the losers were told their email belonged to another
// account.
func TestOIDCConcurrentFirstExchanges(t *testing.T) {
	t.Parallel()
	idp := testidp.New(t, testidp.Options{})
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		OIDC: identity.OIDCConfig{Issuer: idp.URL, ClientID: testidp.DefaultClientID}})
	ctx := t.Context()
	// Discovery happens once, before the race.
	if _, err := env.AnonClient().Exchange(ctx, api.ExchangeRequest{
		IDToken: idToken(t, idp.Key, testidp.KeyID, idp.Claims(time.Now(), "warm-up", nil))}); err != nil {
		t.Fatal(err)
	}
	// One subject, eight tokens (each token is good for one exchange).
	const n = 8
	toks := make([]string, n)
	for i := range n {
		toks[i] = idToken(t, idp.Key, testidp.KeyID, idp.Claims(time.Now(), "dana", map[string]any{"jti": fmt.Sprint(i)}))
	}
	users := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := env.AnonClient().Exchange(ctx, api.ExchangeRequest{IDToken: toks[i]})
			if err == nil {
				users[i] = resp.User.ID
			}
			errs[i] = err
		})
	}
	wg.Wait()
	want := slices.DeleteFunc(slices.Clone(users), func(u string) bool { return u == "" })
	if len(want) == 0 {
		t.Fatalf("every exchange failed: %v", errs)
	}
	for i := range n {
		if errs[i] != nil || users[i] != want[0] {
			t.Errorf("exchange %d got user %q, %v; want user %s", i, users[i], errs[i], want[0])
		}
	}
	if got := count(t, env, `SELECT count(*) FROM users WHERE oidc_subject = 'dana'`); got != 1 {
		t.Fatalf("users for subject dana: got %d; want 1", got)
	}
}
