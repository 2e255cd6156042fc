package controld_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// tokenOwner is a user who owns a funded project of their own, alpha.
func tokenOwner(t *testing.T, env *controldtest.Env) (api.User, *api.Client) {
	t.Helper()
	u, tok := env.AddUser(t, "alice@example.test", api.RoleUser)
	alice := env.Client(tok, api.WithProject("alpha"))
	if _, err := alice.ProjectCreate(t.Context(), api.ProjectCreateRequest{Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	env.Credit(t, "alpha", 1_000_000)
	return u, alice
}

// tokenClient is an API client acting as a token, on a connection whose
// credential is the token (the auth callout lets it in as the token's
// principal), as the CLI makes with GPUAAS_TOKEN.
func tokenClient(t *testing.T, env *controldtest.Env, secret string) *api.Client {
	t.Helper()
	id, ok := api.MachineTokenID(secret)
	if !ok {
		t.Fatalf("secret %q does not have a token's form", secret)
	}
	if got := api.TokenUserID(secret); got != id {
		t.Fatalf("TokenUserID: got %q; want %q", got, id)
	}
	// No project: a token's requests act in its own project by default.
	return env.UserClient(t, id, secret).With(api.WithProject(""))
}

// TestTokenActsWithItsRoleInItsProject: a viewer token lists its project's
// allocations and cannot create one; a member token creates one, and the
// audit row names the token as its actor; neither reaches another project
// nor mints credentials.
func TestTokenActsWithItsRoleInItsProject(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	alice, owner := tokenOwner(t, env)

	viewer, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci-read", Role: api.ProjectViewer, TTL: "30d"})
	if err != nil {
		t.Fatal(err)
	}
	if viewer.Token.Project != "alpha" || viewer.Token.State != api.TokenActive || viewer.Token.CreatedBy != alice.ID {
		t.Errorf("token: got %+v; want active in alpha, made by %s", viewer.Token, alice.ID)
	}
	if got := count(t, env, `SELECT count(*) FROM api_tokens WHERE secret_hash = sha256(convert_to($1, 'UTF8'))`, viewer.Secret); got != 1 {
		t.Errorf("tokens stored with the secret's SHA-256: got %d; want 1", got)
	}
	if got := count(t, env, `SELECT count(*) FROM api_tokens WHERE position($1 in encode(secret_hash, 'escape')) > 0`, viewer.Secret); got != 0 {
		t.Errorf("the secret is stored in clear")
	}
	v := tokenClient(t, env, viewer.Secret)
	who, err := v.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if who.User.ID != viewer.Token.ID || who.Token == nil || who.Token.Name != "ci-read" {
		t.Errorf("whoami: got %+v (token %+v); want the token %s", who.User, who.Token, viewer.Token.ID)
	}
	if _, err := v.AllocList(ctx, api.AllocListRequest{}); err != nil {
		t.Errorf("viewer token alloc list: %v", err)
	}
	// A pipeline's reads of jobs, volumes, images and webhooks are a
	// token's too (tokenEndpoints); creating a webhook is an owner's.
	for name, call := range map[string]func() error{
		"job list":     func() error { _, err := v.JobList(ctx, api.JobListRequest{}); return err },
		"volume list":  func() error { _, err := v.VolumeList(ctx, api.VolumeListRequest{}); return err },
		"image list":   func() error { _, err := v.ImageList(ctx, api.ImageListRequest{}); return err },
		"webhook list": func() error { _, err := v.WebhookList(ctx, api.WebhookListRequest{}); return err },
	} {
		if err := call(); err != nil {
			t.Errorf("viewer token %s: %v", name, err)
		}
	}
	if _, err := v.WebhookAdd(ctx, api.WebhookAddRequest{URL: "https://hooks.example.com/x", Events: []string{api.EventAllocState}}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("viewer token webhook add: got %v; want forbidden", err)
	}
	if _, err := v.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("viewer token alloc create: got %v; want forbidden", err)
	}

	member, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci-run", Role: api.ProjectMember, TTL: "12h"})
	if err != nil {
		t.Fatal(err)
	}
	m := tokenClient(t, env, member.Secret)
	a, err := m.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatalf("member token alloc create: %v", err)
	}
	if got := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'alloc.create' AND target_id = $1 AND actor_id = $2`,
		a.ID, member.Token.ID); got != 1 {
		t.Errorf("audit rows of the allocation with the token as actor: got %d; want 1", got)
	}

	refused := []struct {
		name string
		call func() error
		want error
	}{
		{"another project", func() error {
			_, err := m.With(api.WithProject(controldtest.ProjectName)).AllocList(ctx, api.AllocListRequest{})
			return err
		}, api.ErrNotFound},
		{"token.create", func() error {
			_, err := m.TokenCreate(ctx, api.TokenCreateRequest{Name: "more", Role: api.ProjectMember, TTL: "1d"})
			return err
		}, api.ErrForbidden},
		{"project.create", func() error {
			_, err := m.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "beta"})
			return err
		}, api.ErrForbidden},
		{"auth.ssh_cert", func() error {
			_, err := m.SSHCert(ctx, api.SSHCertRequest{PublicKey: sshPublicKey(t)})
			return err
		}, api.ErrForbidden},
	}
	for _, tt := range refused {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("member token %s: got %v; want %v", tt.name, err, tt.want)
		}
	}
	// Nobody can make a token's principal a member elsewhere, not even
	// an admin adding it by its email.
	admin := env.Client(env.AdminToken)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Project: controldtest.ProjectName,
		Email: member.Token.ID + "@" + api.TokenDomain, Role: api.ProjectMember}); err == nil {
		t.Errorf("adding a token's principal to another project: got no error")
	}
	if got := count(t, env, `SELECT count(*) FROM project_members WHERE user_id = $1`, member.Token.ID); got != 1 {
		t.Errorf("memberships of the token: got %d; want 1", got)
	}
}

// TestTokenRevokedIsRefusedAtOnce: a token that was just used (its check
// cached) is refused by the very next request after its revocation.
func TestTokenRevokedIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{SessionCacheTTL: time.Hour})
	ctx := t.Context()
	_, owner := tokenOwner(t, env)
	tok, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci", Role: api.ProjectViewer, TTL: "1d"})
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client(tok.Secret, api.WithProject(""))
	for range 2 { // the second is served from the cache
		if _, err := c.AllocList(ctx, api.AllocListRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := owner.TokenRevoke(ctx, api.TokenRevokeRequest{Token: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if rev.State != api.TokenRevoked {
		t.Errorf("state: got %s; want revoked", rev.State)
	}
	if _, err := c.AllocList(ctx, api.AllocListRequest{}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Errorf("request after revoke: got %v; want unauthenticated", err)
	}
	if _, err := owner.TokenRevoke(ctx, api.TokenRevokeRequest{Token: tok.Token.ID}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("revoke again: got %v; want conflict", err)
	}
	list, err := owner.TokenList(ctx, api.TokenListRequest{All: true})
	if err != nil || len(list.Tokens) != 1 || list.Tokens[0].State != api.TokenRevoked {
		t.Errorf("token list --all: got %+v, %v; want the revoked token", list, err)
	}
	if live, err := owner.TokenList(ctx, api.TokenListRequest{}); err != nil || len(live.Tokens) != 0 {
		t.Errorf("token list: got %+v, %v; want none live", live, err)
	}
}

// TestTokenExpires: a token is refused once its TTL has passed (the
// injected clock).
func TestTokenExpires(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now())
	env := controldtest.Start(t, controldtest.Options{Now: clock.Now})
	ctx := t.Context()
	_, owner := tokenOwner(t, env)
	tok, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "short", Role: api.ProjectViewer, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client(tok.Secret, api.WithProject(""))
	if _, err := c.AllocList(ctx, api.AllocListRequest{}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if _, err := c.AllocList(ctx, api.AllocListRequest{}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Errorf("request after the TTL: got %v; want unauthenticated", err)
	}
}

// TestTokenCreateRefusals: bad input and projects the caller does not own
// are refused with the reason, and nothing is written.
func TestTokenCreateRefusals(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	_, owner := tokenOwner(t, env)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := owner.ProjectAddMember(ctx, api.AddMemberRequest{Project: "alpha", Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	bobc := env.Client(bobToken, api.WithProject("alpha"))
	ok := api.TokenCreateRequest{Name: "ci", Role: api.ProjectViewer, TTL: "30d"}
	with := func(f func(*api.TokenCreateRequest)) api.TokenCreateRequest { r := ok; f(&r); return r }
	tests := []struct {
		name string
		c    *api.Client
		req  api.TokenCreateRequest
		want error
	}{
		{"ttl 0", owner, with(func(r *api.TokenCreateRequest) { r.TTL = "0" }), api.ErrInvalidArgument},
		{"ttl 0d", owner, with(func(r *api.TokenCreateRequest) { r.TTL = "0d" }), api.ErrInvalidArgument},
		{"ttl negative", owner, with(func(r *api.TokenCreateRequest) { r.TTL = "-1h" }), api.ErrInvalidArgument},
		{"ttl over the maximum", owner, with(func(r *api.TokenCreateRequest) { r.TTL = "366d" }), api.ErrInvalidArgument},
		{"ttl missing", owner, with(func(r *api.TokenCreateRequest) { r.TTL = "" }), api.ErrInvalidArgument},
		{"role owner", owner, with(func(r *api.TokenCreateRequest) { r.Role = api.ProjectOwner }), api.ErrInvalidArgument},
		{"role admin", owner, with(func(r *api.TokenCreateRequest) { r.Role = "admin" }), api.ErrInvalidArgument},
		{"bad name", owner, with(func(r *api.TokenCreateRequest) { r.Name = "CI Token" }), api.ErrInvalidArgument},
		{"a member, not an owner", bobc, ok, api.ErrForbidden},
		{"a project of someone else", owner, with(func(r *api.TokenCreateRequest) { r.Project = controldtest.ProjectName }), api.ErrNotFound},
	}
	before := countEffects(t, env)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.TokenCreate(ctx, tt.req)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
			if e := (*api.Error)(nil); !errors.As(err, &e) || e.Message == "" {
				t.Errorf("refusal without a reason: %v", err)
			}
		})
	}
	if after := countEffects(t, env); after != before {
		t.Errorf("rows after the refusals: got %+v; want %+v", after, before)
	}
	if n := count(t, env, `SELECT count(*) FROM api_tokens`) + count(t, env, `SELECT count(*) FROM users WHERE provider = 'token'`); n != 0 {
		t.Errorf("token rows after the refusals: got %d; want 0", n)
	}
	// A name is unique among a project's live tokens.
	if _, err := owner.TokenCreate(ctx, ok); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.TokenCreate(ctx, ok); !errors.Is(err, api.ErrConflict) {
		t.Errorf("same name again: got %v; want conflict", err)
	}
}

// TestTokenConnectionsAreLiveSessions: the bus registry, which closes the
// NATS connections of ended sessions (identity.SessionsEnded), takes a
// live token's connection for a live one, and a revoked token's for
// revoked. It took every token connection for an unknown session, so a
// token's connection was closed again within a second of each reconnect
// and its requests timed out.
func TestTokenConnectionsAreLiveSessions(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	_, owner := tokenOwner(t, env)
	tok, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci", Role: api.ProjectViewer, TTL: "1d"})
	if err != nil {
		t.Fatal(err)
	}
	ref := []gateproto.GateSession{{SessionID: tok.Token.ID, UserID: tok.Token.ID}}
	if ended, err := identity.SessionsEnded(ctx, env.Server.Pool(), ref, time.Now()); err != nil || len(ended) != 0 {
		t.Errorf("live token: got ended %+v, %v; want none", ended, err)
	}
	if _, err := owner.TokenRevoke(ctx, api.TokenRevokeRequest{Token: "ci"}); err != nil {
		t.Fatal(err)
	}
	ended, err := identity.SessionsEnded(ctx, env.Server.Pool(), ref, time.Now())
	if err != nil || len(ended) != 1 || ended[0].Reason != gateproto.SessionEndedRevoked {
		t.Errorf("revoked token: got %+v, %v; want ended, revoked", ended, err)
	}
}

// TestTokenNotMintedByADelegatedSession: a session the gateway opened for a
// certificate (commands over SSH without the user's own token) cannot
// create a token, even in a project the user owns: it mints no
// credentials.
func TestTokenNotMintedByADelegatedSession(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, SSHCertTTL: time.Hour})
	ctx := t.Context()
	alice, owner := tokenOwner(t, env)
	delegated := mustUserToken(t, gatewayClient(t, env), alice.ID, userCert(t, owner))
	_, err := env.Client(delegated, api.WithProject("alpha")).TokenCreate(ctx,
		api.TokenCreateRequest{Name: "ci", Role: api.ProjectViewer, TTL: "1d"})
	if !errors.Is(err, api.ErrForbidden) {
		t.Errorf("token create by a delegated session: got %v; want forbidden", err)
	}
	if n := count(t, env, `SELECT count(*) FROM api_tokens`); n != 0 {
		t.Errorf("tokens: got %d; want 0", n)
	}
}

// TestTokenEndsWithItsCreatorsAccount: disabling the person who made a
// token stops the token too (checked when its check is not cached: the
// cache is off here), and only a project's owners list its tokens.
func TestTokenEndsWithItsCreatorsAccount(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{SessionCacheTTL: -1})
	ctx := t.Context()
	alice, owner := tokenOwner(t, env)
	tok, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci", Role: api.ProjectViewer, TTL: "1d"})
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client(tok.Secret, api.WithProject(""))
	if _, err := c.TokenList(ctx, api.TokenListRequest{}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("token list by the token: got %v; want forbidden", err)
	}
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := owner.ProjectAddMember(ctx, api.AddMemberRequest{Project: "alpha", Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client(bobToken, api.WithProject("alpha")).TokenList(ctx, api.TokenListRequest{}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("token list by a member: got %v; want forbidden", err)
	}
	if _, err := c.AllocList(ctx, api.AllocListRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client(env.AdminToken).AdminUserDisable(ctx, alice.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AllocList(ctx, api.AllocListRequest{}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Errorf("token of a disabled creator: got %v; want unauthenticated", err)
	}
}

// TestTokenOfADisabledCreatorIsRefusedAtOnce: with the check cached, the
// token's next request after its creator is disabled is refused, and the
// bus registry takes its connections for ended.
func TestTokenOfADisabledCreatorIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{SessionCacheTTL: time.Hour})
	ctx := t.Context()
	alice, owner := tokenOwner(t, env)
	tok, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci", Role: api.ProjectViewer, TTL: "1d"})
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client(tok.Secret, api.WithProject(""))
	for range 2 {
		if _, err := c.AllocList(ctx, api.AllocListRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client(env.AdminToken).AdminUserDisable(ctx, alice.ID); err != nil {
		t.Fatal(err)
	}
	// The notification reaches the cache at commit, asynchronously: poll.
	testutil.EventuallyWithin(t, 10*time.Second, "the token to be refused", func() bool {
		_, err := c.AllocList(ctx, api.AllocListRequest{})
		return errors.Is(err, api.ErrUnauthenticated)
	})
	ref := []gateproto.GateSession{{SessionID: tok.Token.ID, UserID: tok.Token.ID}}
	if ended, err := identity.SessionsEnded(ctx, env.Server.Pool(), ref, time.Now()); err != nil || len(ended) != 1 {
		t.Errorf("token of a disabled creator: got ended %+v, %v; want ended", ended, err)
	}
}

// TestProjectMembersListTokensWhileTheyAct: a token is listed among its
// project's members (kind token) while it can act; revoked or expired, it
// is not, though its principal stays a member (the actor of what it did).
func TestProjectMembersListTokensWhileTheyAct(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now().UTC().Truncate(time.Second))
	env := controldtest.Start(t, controldtest.Options{Now: clock.Now})
	ctx := t.Context()
	_, owner := tokenOwner(t, env)
	kinds := func() map[string]string {
		t.Helper()
		out, err := owner.ProjectMembers(ctx, "alpha")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, m := range out.Members {
			got[m.UserID] = m.Kind
		}
		return got
	}
	short, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "short", Role: api.ProjectViewer, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	long, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "long", Role: api.ProjectMember, TTL: "30d"})
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(); got[short.Token.ID] != api.MemberToken || got[long.Token.ID] != api.MemberToken || len(got) != 3 {
		t.Fatalf("members with two live tokens: %v", got)
	}
	if _, err := owner.TokenRevoke(ctx, api.TokenRevokeRequest{Token: "long"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	got := kinds()
	if _, ok := got[long.Token.ID]; ok {
		t.Errorf("a revoked token is listed: %v", got)
	}
	if _, ok := got[short.Token.ID]; ok {
		t.Errorf("an expired token is listed: %v", got)
	}
	if len(got) != 1 {
		t.Errorf("members: %v; want the owner alone", got)
	}
	for id, kind := range got {
		if kind != api.MemberUser {
			t.Errorf("member %s: kind %q; want %q", id, kind, api.MemberUser)
		}
	}
}
