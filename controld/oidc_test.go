package controld_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testidp"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// startOIDC is a controld that trusts a test IdP, on an injected clock.
func startOIDC(t *testing.T) (*controldtest.Env, *testidp.IdP, *testutil.Clock) {
	t.Helper()
	idp := testidp.New(t, testidp.Options{})
	clock := testutil.NewClock(time.Now())
	env := controldtest.Start(t, controldtest.Options{Now: clock.Now, NoNodes: true,
		OIDC: identity.OIDCConfig{Issuer: idp.URL, ClientID: testidp.DefaultClientID}})
	return env, idp, clock
}

// TestOIDCTokenFreshness: an ID token is good for one exchange, soon after
// it was issued, for this client, with the nonce of this login.
func TestOIDCTokenFreshness(t *testing.T) {
	t.Parallel()
	env, idp, clock := startOIDC(t)
	ctx := t.Context()
	anon := env.AnonClient()
	claims := func(sub string, edits map[string]any) string {
		return idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), sub, edits))
	}
	now := func() int64 { return clock.Now().Unix() }

	tests := []struct {
		name    string
		token   func() string
		nonce   string
		want    error // nil: accepted
		wantMsg string
	}{
		{name: "fresh, no nonce (device flow)", token: func() string { return claims("ann", nil) }},
		{name: "fresh, nonce as sent (code flow)", nonce: "n-1", token: func() string { return claims("ann", map[string]any{"nonce": "n-1"}) }},
		{name: "azp of this client", token: func() string { return claims("ann", map[string]any{"azp": testidp.DefaultClientID}) }},
		{name: "issued 4 minutes ago", token: func() string { return claims("ann", map[string]any{"iat": now() - 240}) }},
		{name: "issued 6 minutes ago", want: api.ErrUnauthenticated, wantMsg: "was issued 6m0s ago; this server takes tokens at most 5m0s old",
			token: func() string { return claims("ann", map[string]any{"iat": now() - 360}) }},
		{name: "issued in the future", want: api.ErrUnauthenticated, wantMsg: "issued in the future",
			token: func() string { return claims("ann", map[string]any{"iat": now() + 300}) }},
		{name: "no iat", want: api.ErrUnauthenticated, wantMsg: "no issue time",
			token: func() string { return claims("ann", map[string]any{"iat": nil}) }},
		{name: "azp of another client", want: api.ErrUnauthenticated, wantMsg: "issued to client other-client (azp)",
			token: func() string { return claims("ann", map[string]any{"azp": "other-client"}) }},
		{name: "another nonce", nonce: "n-1", want: api.ErrUnauthenticated, wantMsg: "does not carry the nonce this login sent",
			token: func() string { return claims("ann", map[string]any{"nonce": "n-2"}) }},
		{name: "nonce sent, none in the token", nonce: "n-1", want: api.ErrUnauthenticated, wantMsg: "does not carry the nonce",
			token: func() string { return claims("ann", nil) }},
		{name: "nonce in the token, none sent", want: api.ErrUnauthenticated, wantMsg: "the exchange sent none",
			token: func() string { return claims("ann", map[string]any{"nonce": "n-1"}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock.Advance(time.Second) // each token differs
			before := countRows(t, env)
			resp, err := anon.Exchange(ctx, api.ExchangeRequest{IDToken: tt.token(), Nonce: tt.nonce})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("exchange: %v", err)
				}
				if resp.User.Email != "ann@"+testidp.EmailDomain {
					t.Fatalf("got user %+v; want ann", resp.User)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %v; want %v saying %q", err, tt.want, tt.wantMsg)
			}
			want := before
			want.audit++
			if got := countRows(t, env); got != want {
				t.Fatalf("refused exchange left %+v; want %+v", got, want)
			}
		})
	}
}

// TestOIDCExchangeOnce: the same ID token exchanged twice, in a row or at
// once, gives one session.
func TestOIDCExchangeOnce(t *testing.T) {
	t.Parallel()
	env, idp, clock := startOIDC(t)
	ctx := t.Context()
	anon := env.AnonClient()
	tok := idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "ben", nil))
	if _, err := anon.Exchange(ctx, api.ExchangeRequest{IDToken: tok}); err != nil {
		t.Fatal(err)
	}
	before := countRows(t, env)
	_, err := anon.Exchange(ctx, api.ExchangeRequest{IDToken: tok})
	if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "already exchanged") {
		t.Fatalf("second exchange: got %v; want unauthenticated saying the token was used", err)
	}
	if got := countRows(t, env); got.sessions != before.sessions || got.users != before.users {
		t.Fatalf("second exchange left %+v; want the sessions and users of %+v", got, before)
	}

	clock.Advance(time.Second)
	fresh := idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), "ben", nil))
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = env.AnonClient().Exchange(ctx, api.ExchangeRequest{IDToken: fresh}) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, api.ErrUnauthenticated) && !errors.Is(err, api.ErrConflict):
			t.Errorf("concurrent exchange: got %v; want success, unauthenticated or conflict", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent exchanges of one token: %d succeeded; want 1 (%v)", n, ok, errs)
	}
	if got := count(t, env, `SELECT count(*) FROM oidc_exchanged_tokens`); got != 2 {
		t.Fatalf("exchanged tokens recorded: got %d; want 2", got)
	}
	// Housekeeping forgets them once they expired.
	clock.Advance(6 * time.Minute)
	if err := env.Server.Identity().Prune(ctx, env.Server.Pool()); err != nil {
		t.Fatal(err)
	}
	if got := count(t, env, `SELECT count(*) FROM oidc_exchanged_tokens`); got != 0 {
		t.Fatalf("exchanged tokens after they expired and were pruned: got %d; want 0", got)
	}
}

// TestOIDCLink: an email held by another account, or a changed IdP
// subject, is refused with a hint to link, never taken as a new person;
// an admin's link lets the identity in as the existing user.
func TestOIDCLink(t *testing.T) {
	t.Parallel()
	env, idp, clock := startOIDC(t)
	ctx := t.Context()
	anon := env.AnonClient()
	admin := env.Client(env.AdminToken)
	exchange := func(sub string, edits map[string]any) (*api.LoginResponse, error) {
		clock.Advance(time.Second)
		return anon.Exchange(ctx, api.ExchangeRequest{IDToken: idToken(t, idp.Key, testidp.KeyID, idp.Claims(clock.Now(), sub, edits))})
	}
	dana, err := exchange("dana", nil)
	if err != nil {
		t.Fatal(err)
	}

	// The IdP now says dana is another subject.
	before := tableDigest(t, env)
	_, err = exchange("dana-2", map[string]any{"email": dana.User.Email})
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "changed subject") {
		t.Fatalf("changed subject: got %v; want conflict saying the subject changed", err)
	}
	var e *api.Error
	errors.As(err, &e)
	if want := "gpuaas admin user link " + dana.User.Email + " --issuer " + idp.URL + " --subject dana-2"; !strings.Contains(e.Hint, want) {
		t.Fatalf("hint %q; want it to give %q", e.Hint, want)
	}
	if got := tableDigest(t, env); got != before {
		t.Fatal("a refused exchange changed the identity tables")
	}
	linked, err := admin.AdminUserLink(ctx, api.UserLinkRequest{User: dana.User.Email, Issuer: idp.URL, Subject: "dana-2"})
	if err != nil {
		t.Fatal(err)
	}
	if linked.ID != dana.User.ID || linked.OIDCSubject != "dana-2" {
		t.Fatalf("linked %+v; want dana's account with subject dana-2", linked)
	}
	again, err := exchange("dana-2", map[string]any{"email": dana.User.Email})
	if err != nil || again.User.ID != dana.User.ID {
		t.Fatalf("exchange after the link: got %v, %+v; want dana's account", err, again)
	}
	if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'admin.user_link' AND detail->>'previous_subject' = 'dana'`); n != 1 {
		t.Fatalf("audited links: got %d; want 1 recording the previous subject", n)
	}

	// A local account: the IdP's user with its email is linked to it and
	// logs in as the admin; the password still works.
	_, err = exchange("root", map[string]any{"email": controldtest.AdminEmail})
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "already belongs to another account") {
		t.Fatalf("email of a local account: got %v; want conflict", err)
	}
	if _, err := admin.AdminUserLink(ctx, api.UserLinkRequest{User: controldtest.AdminEmail, Issuer: idp.URL, Subject: "root"}); err != nil {
		t.Fatal(err)
	}
	root, err := exchange("root", map[string]any{"email": controldtest.AdminEmail})
	if err != nil || root.User.ID != env.Admin.ID {
		t.Fatalf("exchange of the linked local account: got %v, %+v; want the admin", err, root)
	}
	env.Login(t, controldtest.AdminEmail, controldtest.AdminPassword)

	// A disabled user's identity opens nothing.
	if _, err := admin.AdminUserDisable(ctx, dana.User.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := exchange("dana-2", map[string]any{"email": dana.User.Email}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("exchange of a disabled user: got %v; want forbidden", err)
	}
}
