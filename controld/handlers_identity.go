package controld

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// identityEndpoints are logins and sessions (auth.*) and user
// administration (admin.user_*), over controld/identity.
func (s *Server) identityEndpoints() []endpointDef {
	return []endpointDef{
		authEndpoint(s, api.OpAuthLogin, s.loginAttempt),
		authEndpoint(s, api.OpAuthExchange, s.exchangeAttempt),
		mutation(s, api.OpAuthLogout, s.logout),
		query(s, api.OpAuthWhoami, s.whoami),
		query(s, api.OpAuthConfig, s.authConfig),

		// Invite codes are secrets: never stored for replay.
		mutation(s, api.OpAdminUserAdd, s.userAdd),
		mutation(s, api.OpAdminUserInvite, s.userInvite),
		query(s, api.OpAdminUserList, s.userList),
		mutation(s, api.OpAdminUserDisable, s.userDisable),
		mutation(s, api.OpAdminUserEnable, s.userEnable),
		mutation(s, api.OpAdminUserLink, s.userLink),
	}
}

// authAttempt is one login, invite redemption or exchange, decoded and
// checked, ready to run in the mutation's transaction.
type authAttempt struct {
	// action is the audit action of a success; a refusal is audited as
	// action + "_refused".
	action string
	actor  string
	// email is the account the per-account limit counts against ("" for
	// none); limited says whether login limits apply at all.
	email   string
	limited bool
	run     mutate.Func
}

// authEndpoint serves login (password or invite) and exchange: mutations
// without a logged-in actor, whose responses (session tokens) are never
// stored for replay. Logins go through the failed-login limits first, and
// every refusal is audited in its own write, outside the transaction that
// was rolled back.
func authEndpoint[Req any](s *Server, e api.Endpoint[Req, api.LoginResponse], attemptOf func(*call, Req) (authAttempt, error)) endpointDef {
	name := e.Name()
	return custom(s, e, func(ctx context.Context, c *call, decode func() (Req, error)) ([]byte, error) {
		key := c.req.Headers().Get(api.HeaderIdempotencyKey)
		if err := mutate.ValidateKey(name, key); err != nil {
			return nil, err
		}
		req, err := decode()
		if err != nil {
			return nil, err
		}
		a, err := attemptOf(c, req)
		if err != nil {
			return nil, err
		}
		var attempt *identity.Attempt
		if a.limited {
			if attempt, err = s.identity.Limiter().Begin(ctx, s.pool, a.email, c.source()); err != nil {
				s.auditRefusal(ctx, c, a, err)
				return nil, err
			}
		}
		out, err := s.mut.Run(ctx, mutate.Request{Endpoint: name, ActorID: a.actor, Key: key, CorrelationID: c.corr,
			Fingerprint: c.req.Data(), NoReplay: true},
			func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
				resp, eff, err := a.run(ctx, tx)
				if err == nil && attempt != nil {
					err = attempt.Succeeded(ctx, tx)
				}
				return resp, eff, err
			})
		if err != nil {
			s.auditRefusal(ctx, c, a, err)
			if attempt != nil {
				s.auditLockouts(ctx, c, a, attempt.Failed())
			}
		}
		return out, err
	})
}

// auditLockouts records the login limits a failed attempt set off
// (auth.login_lockout, auth.login_slowdown), each in its own write like
// the refusal.
func (s *Server) auditLockouts(ctx context.Context, c *call, a authAttempt, triggers []identity.Trigger) {
	for _, t := range triggers {
		detail := map[string]any{"scope": t.Kind, "failures": t.Failures}
		action := "auth.login_lockout"
		if t.Kind == identity.TriggerSlowdown {
			action = "auth.login_slowdown"
		} else {
			detail["locked_seconds"] = int64(t.Wait / time.Second)
		}
		entry := audit.Entry{Action: action}
		if a.email != "" && t.Kind != identity.TriggerSource {
			entry.TargetType, entry.TargetID = "email", strings.ToLower(a.email)
		}
		if src := c.source(); src != "" {
			detail["source"] = src
		}
		entry.Detail = detail
		meta := audit.Meta{At: s.now(), ActorID: a.actor, CorrelationID: c.corr}
		if err := audit.Write(context.WithoutCancel(ctx), s.pool, meta, entry); err != nil {
			c.log.Warn("audit login limit", "action", action, "err", err)
		}
	}
}

// auditRefusal records a refused login. Catalog errors only: an internal
// error is logged by replyError, and the database may be what failed.
func (s *Server) auditRefusal(ctx context.Context, c *call, a authAttempt, err error) {
	var e *api.Error
	if !errors.As(err, &e) {
		return
	}
	detail := map[string]any{"code": e.Code, "message": e.Message}
	if a.email != "" {
		detail["email"] = a.email
	}
	if src := c.source(); src != "" {
		detail["source"] = src
	}
	entry := audit.Entry{Action: a.action + "_refused", TargetType: "email", TargetID: strings.ToLower(a.email), Detail: detail}
	if a.email == "" {
		entry.TargetType = ""
	}
	meta := audit.Meta{At: s.now(), ActorID: a.actor, CorrelationID: c.corr}
	if werr := audit.Write(context.WithoutCancel(ctx), s.pool, meta, entry); werr != nil {
		c.log.Warn("audit refused login", "action", entry.Action, "err", werr)
	}
}

// loginAttempt is auth.login: a password login, or the redemption of an
// invite when the request carries one.
func (s *Server) loginAttempt(_ *call, req api.LoginRequest) (authAttempt, error) {
	req.Email = strings.TrimSpace(req.Email)
	if req.Invite != "" {
		return s.inviteAttempt(req)
	}
	if req.Email == "" || req.Password == "" {
		return authAttempt{}, api.Errorf(api.CodeInvalidArgument, "email and password are required")
	}
	// The email asked for goes to the audit log as it is.
	if err := api.CheckText("email", req.Email); err != nil {
		return authAttempt{}, err
	}
	return authAttempt{action: api.EndpointAuthLogin, actor: "anonymous:" + strings.ToLower(req.Email),
		email: req.Email, limited: true,
		run: func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			resp, err := s.identity.Login(ctx, tx, req.Email, req.Password)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			return resp, loginEffect(api.EndpointAuthLogin, resp), nil
		}}, nil
}

// inviteAttempt redeems an invite. Codes are random (130 bits), so only
// the per-source limit applies: there is no account to count against
// until the code is known to be right.
func (s *Server) inviteAttempt(req api.LoginRequest) (authAttempt, error) {
	if err := identity.ValidatePassword(req.Password); err != nil {
		return authAttempt{}, err
	}
	const action = "auth.invite_redeem"
	return authAttempt{action: action, actor: "anonymous:invite", limited: true,
		run: func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			r, err := s.identity.RedeemInvite(ctx, tx, req.Invite, req.Email, req.Password)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			resp := r.Login
			eff := loginEffect(action, resp)
			eff.Audit = audit.Entry{Action: action, TargetType: "user", TargetID: resp.User.ID,
				Detail: map[string]any{"session_id": resp.SessionID, "revoked_sessions": r.Revoked}}
			if len(r.Revoked) > 0 {
				s.identity.Revoking(r.Revoked...)
				eff.Events = append(eff.Events, sessionsRevoked(resp.User.ID, r.Revoked, "password_reset"))
			}
			return resp, eff, nil
		}}, nil
}

func (s *Server) exchangeAttempt(c *call, req api.ExchangeRequest) (authAttempt, error) {
	if req.IDToken == "" {
		return authAttempt{}, api.Errorf(api.CodeInvalidArgument, "id_token is required")
	}
	return authAttempt{action: api.EndpointAuthExchange, actor: "anonymous:oidc",
		run: func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			resp, err := s.identity.Exchange(ctx, tx, req.IDToken, req.Nonce)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			return resp, loginEffect(api.EndpointAuthExchange, resp), nil
		}}, nil
}

// loginEffect is what every new session records.
func loginEffect(action string, resp *api.LoginResponse) mutate.Effect {
	return mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "session", TargetID: resp.SessionID,
			Detail: map[string]string{"user_id": resp.User.ID}},
		Events: []outbox.Event{{Kind: "auth.login", Subject: resp.SessionID, Users: []string{resp.User.ID},
			Payload: map[string]any{"session_id": resp.SessionID, "expires_at": resp.ExpiresAt}}},
	}
}

// sessionsRevoked is the event every revocation emits, naming all the
// sessions it ended: controld closes their NATS connections and sshgate
// their SSH sessions.
func sessionsRevoked(userID string, sessionIDs []string, reason string) outbox.Event {
	return outbox.Event{Kind: api.EventSessionRevoked, Subject: userID, Users: []string{userID},
		Payload: api.SessionRevoked{UserID: userID, SessionIDs: sessionIDs, Reason: reason}}
}

func (s *Server) logout(_ context.Context, c *call, _ api.Empty) (work[api.LogoutResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.LogoutResponse, mutate.Effect, error) {
		p := c.principal
		if err := identity.Revoke(ctx, tx, p.SessionID, s.now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		s.identity.Revoking(p.SessionID)
		return &api.LogoutResponse{SessionID: p.SessionID}, mutate.Effect{
			Audit: audit.Entry{Action: "auth.logout", TargetType: "session", TargetID: p.SessionID},
			Events: []outbox.Event{{Kind: api.EventSessionRevoked, Subject: p.SessionID, Users: []string{p.UserID},
				Payload: api.SessionRevoked{UserID: p.UserID, SessionIDs: []string{p.SessionID}, Reason: "logout"}}},
		}, nil
	}, nil
}

func (s *Server) whoami(ctx context.Context, c *call, _ api.Empty) (*api.WhoamiResponse, error) {
	u, err := identity.UserByID(ctx, s.pool, c.principal.UserID)
	if err != nil {
		return nil, err
	}
	projects, err := project.ListForUser(ctx, s.pool, u.ID)
	if err != nil {
		return nil, err
	}
	if projects == nil {
		projects = []api.Project{}
	}
	who := api.WhoamiResponse{User: u, SessionID: c.principal.SessionID, ExpiresAt: c.principal.ExpiresAt, Projects: projects}
	if who.Token, err = s.tokenOf(ctx, c); err != nil {
		return nil, err
	}
	if p, ok, err := project.DefaultOf(ctx, s.pool, u.ID); err != nil {
		return nil, err
	} else if ok {
		who.DefaultProject = &p
	}
	return &who, nil
}

// authConfig tells clients how to log in: whether passwords work and
// which identity provider's tokens auth.exchange takes. Nothing in it is
// secret (the OIDC client is public), so anyone may ask.
func (s *Server) authConfig(context.Context, *call, api.Empty) (*api.AuthConfigResponse, error) {
	m := s.identity.LoginMethods()
	return &m, nil
}

// userEvent tells subscribers that an administrator changed u.
func userEvent(u api.AdminUser) outbox.Event {
	return outbox.Event{Kind: api.EventUser, Subject: u.ID, Payload: u}
}

func (s *Server) userAdd(_ context.Context, c *call, req api.UserAddRequest) (work[api.UserInviteResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.UserInviteResponse, mutate.Effect, error) {
		u, err := identity.CreateInvitedUser(ctx, tx, identity.NewUser{Email: req.Email, Name: req.Name, Role: req.Role}, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return s.invite(ctx, tx, c, u.ID, "admin.user_add")
	}, nil
}

func (s *Server) userInvite(_ context.Context, c *call, req api.UserRef) (work[api.UserInviteResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.UserInviteResponse, mutate.Effect, error) {
		u, err := identity.AdminUserByRef(ctx, tx, req.User, true)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return s.invite(ctx, tx, c, u.ID, "admin.user_invite")
	}, nil
}

// invite issues an invite for userID; the audit row never holds the code.
func (s *Server) invite(ctx context.Context, tx pgx.Tx, c *call, userID, action string) (*api.UserInviteResponse, mutate.Effect, error) {
	inv, err := identity.CreateInvite(ctx, tx, userID, c.principal.UserID, s.now(), s.identity.InviteTTL())
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
		Events: []outbox.Event{userEvent(u)},
	}, nil
}

func (s *Server) userList(ctx context.Context, _ *call, _ api.Empty) (*api.UserListResponse, error) {
	us, err := identity.ListUsers(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	return &api.UserListResponse{Users: us}, nil
}

// userDisable disables a user and, in the same transaction, revokes every
// session they have.
func (s *Server) userDisable(_ context.Context, c *call, req api.UserRef) (work[api.UserDisableResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.UserDisableResponse, mutate.Effect, error) {
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
			s.identity.Revoking(revoked...)
			eff.Events = append(eff.Events, sessionsRevoked(u.ID, revoked, "disabled"))
		}
		return &api.UserDisableResponse{User: u, RevokedSessions: revoked}, eff, nil
	}, nil
}

func (s *Server) userEnable(_ context.Context, c *call, req api.UserRef) (work[api.AdminUser], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.AdminUser, mutate.Effect, error) {
		u, err := identity.Enable(ctx, tx, req.User)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &u, mutate.Effect{
			Audit:  audit.Entry{Action: "admin.user_enable", TargetType: "user", TargetID: u.ID, Detail: map[string]any{"email": u.Email}},
			Events: []outbox.Event{userEvent(u)},
		}, nil
	}, nil
}

func (s *Server) userLink(_ context.Context, c *call, req api.UserLinkRequest) (work[api.AdminUser], error) {
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
			Events: []outbox.Event{userEvent(u)},
		}, nil
	}, nil
}
