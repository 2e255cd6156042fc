// Package identityapi declares the endpoints of logins, sessions and
// user administration (auth.*, admin.user_*; docs/decisions/0069-domain-endpoints.md).
// It is not part of controld/identity, which keeps the users and
// sessions: controld/endpoint and controld/project import identity.
package identityapi

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DB is what the endpoints need of the database outside a mutation's
// transaction: reads and the audit rows of refused logins, and
// transactions of their own for the failed-login limits (a pool meets
// it).
type DB interface {
	store.Querier
	identity.Beginner
}

// Deps are what identity's endpoints need of the server.
type Deps struct {
	DB DB
	// IDs keeps users and sessions, counts failed logins
	// (identity.Limiter) and drops revoked sessions from its cache.
	IDs *identity.Service
	// Mut runs a login's transaction: logins are served whole by their
	// handler (endpoint.Custom), as their refusals are audited and
	// limited outside it.
	Mut *mutate.Runner
	Now func() time.Time
}

// Endpoints are logins and sessions (auth.*) and user administration
// (admin.user_*), over controld/identity.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		authEndpoint(h, api.OpAuthLogin, h.loginAttempt),
		authEndpoint(h, api.OpAuthExchange, h.exchangeAttempt),
		endpoint.Mutation(api.OpAuthLogout, h.logout),
		endpoint.Query(api.OpAuthWhoami, h.whoami),
		endpoint.Query(api.OpAuthConfig, h.authConfig),

		// Invite codes are secrets: never stored for replay.
		endpoint.Mutation(api.OpAdminUserAdd, h.userAdd),
		endpoint.Mutation(api.OpAdminUserInvite, h.userInvite),
		endpoint.Query(api.OpAdminUserList, h.userList),
		endpoint.Mutation(api.OpAdminUserDisable, h.userDisable),
		endpoint.Mutation(api.OpAdminUserEnable, h.userEnable),
		endpoint.Mutation(api.OpAdminUserLink, h.userLink),
	}
}

type handlers struct{ Deps }

func (h handlers) logout(_ context.Context, r *endpoint.Request, _ api.Empty) (endpoint.Work[api.LogoutResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.LogoutResponse, mutate.Effect, error) {
		p := r.Principal
		if err := identity.Revoke(ctx, tx, p.SessionID, h.Now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		h.IDs.Revoking(p.SessionID)
		return &api.LogoutResponse{SessionID: p.SessionID}, mutate.Effect{
			Audit: audit.Entry{Action: "auth.logout", TargetType: "session", TargetID: p.SessionID},
			Events: []outbox.Event{{Kind: api.EventSessionRevoked, Subject: p.SessionID, Users: []string{p.UserID},
				Payload: api.SessionRevoked{UserID: p.UserID, SessionIDs: []string{p.SessionID}, Reason: "logout"}}},
		}, nil
	}, nil
}

func (h handlers) whoami(ctx context.Context, r *endpoint.Request, _ api.Empty) (*api.WhoamiResponse, error) {
	u, err := identity.UserByID(ctx, h.DB, r.Principal.UserID)
	if err != nil {
		return nil, err
	}
	projects, err := project.ListForUser(ctx, h.DB, u.ID)
	if err != nil {
		return nil, err
	}
	if projects == nil {
		projects = []api.Project{}
	}
	who := api.WhoamiResponse{User: u, SessionID: r.Principal.SessionID, ExpiresAt: r.Principal.ExpiresAt, Projects: projects}
	if who.Token, err = h.tokenOf(ctx, r); err != nil {
		return nil, err
	}
	if p, ok, err := project.DefaultOf(ctx, h.DB, u.ID); err != nil {
		return nil, err
	} else if ok {
		who.DefaultProject = &p
	}
	return &who, nil
}

// tokenOf describes the token the caller is, for auth.whoami; nil for a
// person's session.
func (h handlers) tokenOf(ctx context.Context, r *endpoint.Request) (*api.Token, error) {
	if r.Principal.TokenID == "" {
		return nil, nil
	}
	tok, err := h.IDs.MachineToken(ctx, h.DB, r.Principal.TokenID)
	if err != nil {
		return nil, err
	}
	return &tok, nil
}

// authConfig tells clients how to log in: whether passwords work and
// which identity provider's tokens auth.exchange takes. Nothing in it is
// secret (the OIDC client is public), so anyone may ask.
func (h handlers) authConfig(context.Context, *endpoint.Request, api.Empty) (*api.AuthConfigResponse, error) {
	m := h.IDs.LoginMethods()
	return &m, nil
}
