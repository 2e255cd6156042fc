package identityapi

import (
	"context"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// UserEvent tells subscribers that an administrator changed u (and
// `gpuaas bootstrap` that it made the first admin).
func UserEvent(u api.AdminUser) outbox.Event {
	return outbox.Event{Kind: api.EventUser, Subject: u.ID, Payload: u}
}

func (h handlers) userAdd(_ context.Context, r *endpoint.Request, req api.UserAddRequest) (endpoint.Work[api.UserInviteResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.UserInviteResponse, mutate.Effect, error) {
		u, err := identity.CreateInvitedUser(ctx, tx, identity.NewUser{Email: req.Email, Name: req.Name, Role: req.Role}, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return h.invite(ctx, tx, r, u.ID, "admin.user_add")
	}, nil
}

func (h handlers) userInvite(_ context.Context, r *endpoint.Request, req api.UserRef) (endpoint.Work[api.UserInviteResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.UserInviteResponse, mutate.Effect, error) {
		u, err := identity.AdminUserByRef(ctx, tx, req.User, true)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return h.invite(ctx, tx, r, u.ID, "admin.user_invite")
	}, nil
}

// invite issues an invite for userID; the audit row never holds the code.
func (h handlers) invite(ctx context.Context, tx pgx.Tx, r *endpoint.Request, userID, action string) (*api.UserInviteResponse, mutate.Effect, error) {
	inv, err := identity.CreateInvite(ctx, tx, userID, r.Principal.UserID, h.Now(), h.IDs.InviteTTL())
	if err != nil {
		return nil, mutate.Effect{}, err
	}
	u, err := identity.AdminUserByRef(ctx, tx, userID, false)
	if err != nil {
		return nil, mutate.Effect{}, err
	}
	return &api.UserInviteResponse{User: u, Invite: inv}, mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "user", TargetID: u.ID,
			Detail: map[string]any{"email": u.Email, "role": u.Role, "name": u.Name, "invite_expires_at": inv.ExpiresAt}},
		Events: []outbox.Event{UserEvent(u)},
	}, nil
}

func (h handlers) userList(ctx context.Context, _ *endpoint.Request, _ api.Empty) (*api.UserListResponse, error) {
	us, err := identity.ListUsers(ctx, h.DB)
	if err != nil {
		return nil, err
	}
	return &api.UserListResponse{Users: us}, nil
}

// userDisable disables a user and, in the same transaction, revokes every
// session they have.
func (h handlers) userDisable(_ context.Context, r *endpoint.Request, req api.UserRef) (endpoint.Work[api.UserDisableResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.UserDisableResponse, mutate.Effect, error) {
		u, revoked, err := identity.Disable(ctx, tx, req.User, r.Principal.UserID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if revoked == nil {
			revoked = []string{}
		}
		eff := mutate.Effect{
			Audit: audit.Entry{Action: "admin.user_disable", TargetType: "user", TargetID: u.ID,
				Detail: map[string]any{"email": u.Email, "revoked_sessions": revoked}},
			Events: []outbox.Event{UserEvent(u)},
		}
		if len(revoked) > 0 {
			h.IDs.Revoking(revoked...)
			eff.Events = append(eff.Events, sessionsRevoked(u.ID, revoked, "disabled"))
		}
		return &api.UserDisableResponse{User: u, RevokedSessions: revoked}, eff, nil
	}, nil
}

func (h handlers) userEnable(_ context.Context, _ *endpoint.Request, req api.UserRef) (endpoint.Work[api.AdminUser], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.AdminUser, mutate.Effect, error) {
		u, err := identity.Enable(ctx, tx, req.User)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &u, mutate.Effect{
			Audit:  audit.Entry{Action: "admin.user_enable", TargetType: "user", TargetID: u.ID, Detail: map[string]any{"email": u.Email}},
			Events: []outbox.Event{UserEvent(u)},
		}, nil
	}, nil
}

func (h handlers) userLink(_ context.Context, _ *endpoint.Request, req api.UserLinkRequest) (endpoint.Work[api.AdminUser], error) {
	if u, err := url.Parse(strings.TrimSpace(req.Issuer)); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "issuer %q is not an http(s) URL", req.Issuer).
			WithHint("use the IdP's issuer exactly as its ID tokens carry it (iss), e.g. https://idp.example.com")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.AdminUser, mutate.Effect, error) {
		before, err := identity.AdminUserByRef(ctx, tx, req.User, true)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		u, err := identity.LinkOIDC(ctx, tx, before.ID, req.Issuer, req.Subject)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &u, mutate.Effect{
			Audit: audit.Entry{Action: "admin.user_link", TargetType: "user", TargetID: u.ID,
				Detail: map[string]any{"email": u.Email, "issuer": u.OIDCIssuer, "subject": u.OIDCSubject,
					"previous_issuer": before.OIDCIssuer, "previous_subject": before.OIDCSubject}},
			Events: []outbox.Event{UserEvent(u)},
		}, nil
	}, nil
}
