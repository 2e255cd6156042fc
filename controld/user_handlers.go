package controld

import (
	"context"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// userEndpoints are user administration (admins): add and invite local
// users, list, disable, enable, and link OIDC identities.
func (s *Server) userEndpoints() []endpointDef {
	return []endpointDef{
		// Invite codes are secrets: never stored for replay.
		{api.EndpointAdminUserAdd, s.secretMutation(api.EndpointAdminUserAdd, adminOnly, s.userAdd)},
		{api.EndpointAdminUserInvite, s.secretMutation(api.EndpointAdminUserInvite, adminOnly, s.userInvite)},
		{api.EndpointAdminUserList, s.query(api.EndpointAdminUserList, adminOnly, s.userList)},
		{api.EndpointAdminUserDisable, s.mutation(api.EndpointAdminUserDisable, adminOnly, s.userDisable)},
		{api.EndpointAdminUserEnable, s.mutation(api.EndpointAdminUserEnable, adminOnly, s.userEnable)},
		{api.EndpointAdminUserLink, s.mutation(api.EndpointAdminUserLink, adminOnly, s.userLink)},
	}
}

// userEvent tells subscribers that an administrator changed u.
func userEvent(u api.AdminUser) outbox.Event {
	return outbox.Event{Kind: api.EventUser, Subject: u.ID, Payload: u}
}

func (s *Server) userAdd(_ context.Context, c *call) (mutate.Func, error) {
	var req api.UserAddRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		u, err := identity.CreateInvitedUser(ctx, tx, identity.NewUser{Email: req.Email, Name: req.Name, Role: req.Role}, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return s.invite(ctx, tx, c, u.ID, "admin.user_add")
	}, nil
}

func (s *Server) userInvite(_ context.Context, c *call) (mutate.Func, error) {
	var req api.UserRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		u, err := identity.AdminUserByRef(ctx, tx, req.User, true)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return s.invite(ctx, tx, c, u.ID, "admin.user_invite")
	}, nil
}

// invite issues an invite for userID; the audit row never holds the code.
func (s *Server) invite(ctx context.Context, tx pgx.Tx, c *call, userID, action string) (any, mutate.Effect, error) {
	inv, err := identity.CreateInvite(ctx, tx, userID, c.principal.UserID, s.now(), s.identity.InviteTTL())
	if err != nil {
		return nil, mutate.Effect{}, err
	}
	u, err := identity.AdminUserByRef(ctx, tx, userID, false)
	if err != nil {
		return nil, mutate.Effect{}, err
	}
	return api.UserInviteResponse{User: u, Invite: inv}, mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "user", TargetID: u.ID,
			Detail: map[string]any{"email": u.Email, "role": u.Role, "name": u.Name, "invite_expires_at": inv.ExpiresAt}},
		Events: []outbox.Event{userEvent(u)},
	}, nil
}

func (s *Server) userList(ctx context.Context, _ *call) (any, error) {
	us, err := identity.ListUsers(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	return api.UserListResponse{Users: us}, nil
}

// userDisable disables a user and, in the same transaction, revokes every
// session they have.
func (s *Server) userDisable(_ context.Context, c *call) (mutate.Func, error) {
	var req api.UserRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		u, revoked, err := identity.Disable(ctx, tx, req.User, c.principal.UserID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if revoked == nil {
			revoked = []string{}
		}
		eff := mutate.Effect{
			Audit: audit.Entry{Action: "admin.user_disable", TargetType: "user", TargetID: u.ID,
				Detail: map[string]any{"email": u.Email, "revoked_sessions": revoked}},
			Events: []outbox.Event{userEvent(u)},
		}
		if len(revoked) > 0 {
			eff.Events = append(eff.Events, sessionsRevoked(u.ID, revoked, "disabled"))
		}
		return api.UserDisableResponse{User: u, RevokedSessions: revoked}, eff, nil
	}, nil
}

func (s *Server) userEnable(_ context.Context, c *call) (mutate.Func, error) {
	var req api.UserRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		u, err := identity.Enable(ctx, tx, req.User)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return u, mutate.Effect{
			Audit:  audit.Entry{Action: "admin.user_enable", TargetType: "user", TargetID: u.ID, Detail: map[string]any{"email": u.Email}},
			Events: []outbox.Event{userEvent(u)},
		}, nil
	}, nil
}

func (s *Server) userLink(_ context.Context, c *call) (mutate.Func, error) {
	var req api.UserLinkRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if u, err := url.Parse(strings.TrimSpace(req.Issuer)); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "issuer %q is not an http(s) URL", req.Issuer).
			WithHint("use the IdP's issuer exactly as its ID tokens carry it (iss), e.g. https://idp.example.com")
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		before, err := identity.AdminUserByRef(ctx, tx, req.User, true)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		u, err := identity.LinkOIDC(ctx, tx, before.ID, req.Issuer, req.Subject)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return u, mutate.Effect{
			Audit: audit.Entry{Action: "admin.user_link", TargetType: "user", TargetID: u.ID,
				Detail: map[string]any{"email": u.Email, "issuer": u.OIDCIssuer, "subject": u.OIDCSubject,
					"previous_issuer": before.OIDCIssuer, "previous_subject": before.OIDCSubject}},
			Events: []outbox.Event{userEvent(u)},
		}, nil
	}, nil
}
