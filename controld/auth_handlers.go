package controld

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

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
func (s *Server) authEndpoint(name string) micro.Handler {
	return s.endpoint(name, public, func(ctx context.Context, c *call) ([]byte, error) {
		key := c.req.Headers().Get(api.HeaderIdempotencyKey)
		if err := mutate.ValidateKey(name, key); err != nil {
			return nil, err
		}
		var a authAttempt
		var err error
		if name == api.EndpointAuthLogin {
			a, err = s.loginAttempt(c)
		} else {
			a, err = s.exchangeAttempt(c)
		}
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
		}
		return out, err
	})
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
		s.cfg.Log.Warn("audit refused login", "action", entry.Action, "correlation_id", c.corr, "err", werr)
	}
}

// loginAttempt decodes auth.login: a password login, or the redemption of
// an invite when the request carries one.
func (s *Server) loginAttempt(c *call) (authAttempt, error) {
	var req api.LoginRequest
	if err := c.decode(&req); err != nil {
		return authAttempt{}, err
	}
	req.Email = strings.TrimSpace(req.Email)
	if req.Invite != "" {
		return s.inviteAttempt(req)
	}
	if req.Email == "" || req.Password == "" {
		return authAttempt{}, api.Errorf(api.CodeInvalidArgument, "email and password are required")
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
				eff.Events = append(eff.Events, sessionsRevoked(resp.User.ID, r.Revoked, "password_reset"))
			}
			return resp, eff, nil
		}}, nil
}

func (s *Server) exchangeAttempt(c *call) (authAttempt, error) {
	var req api.ExchangeRequest
	if err := c.decode(&req); err != nil {
		return authAttempt{}, err
	}
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
