package identityapi

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
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
func authEndpoint[Req any](h handlers, e api.Endpoint[Req, api.LoginResponse], attemptOf func(*endpoint.Request, Req) (authAttempt, error)) endpoint.Def {
	name := e.Name()
	return endpoint.Custom(e, func(ctx context.Context, r *endpoint.Request, decode func() (Req, error)) ([]byte, error) {
		key := r.IdempotencyKey
		if err := mutate.ValidateKey(name, key); err != nil {
			return nil, err
		}
		req, err := decode()
		if err != nil {
			return nil, err
		}
		a, err := attemptOf(r, req)
		if err != nil {
			return nil, err
		}
		var attempt *identity.Attempt
		if a.limited {
			if attempt, err = h.IDs.Limiter().Begin(ctx, h.DB, a.email, r.Source()); err != nil {
				h.auditRefusal(ctx, r, a, err)
				return nil, err
			}
		}
		// No fingerprint: a login is never replayed (NoReplay), so
		// mutate.Runner tells repeats apart by the endpoint alone and
		// never hashes the body, which holds the password or ID token.
		out, err := h.Mut.Run(ctx, mutate.Request{Endpoint: name, ActorID: a.actor, Key: key, CorrelationID: r.Corr,
			NoReplay: true},
			func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
				resp, eff, err := a.run(ctx, tx)
				if err == nil && attempt != nil {
					err = attempt.Succeeded(ctx, tx)
				}
				return resp, eff, err
			})
		if err != nil {
			h.auditRefusal(ctx, r, a, err)
			if attempt != nil {
				h.auditLockouts(ctx, r, a, attempt.Failed())
			}
		}
		return out, err
	})
}

// auditLockouts records the login limits a failed attempt set off
// (auth.login_lockout, auth.login_slowdown), each in its own write like
// the refusal.
func (h handlers) auditLockouts(ctx context.Context, r *endpoint.Request, a authAttempt, triggers []identity.Trigger) {
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
		if src := r.Source(); src != "" {
			detail["source"] = src
		}
		entry.Detail = detail
		meta := audit.Meta{At: h.Now(), ActorID: a.actor, CorrelationID: r.Corr}
		if err := audit.Write(context.WithoutCancel(ctx), h.DB, meta, entry); err != nil {
			r.Log.Warn("audit login limit", "action", action, "err", err)
		}
	}
}

// auditRefusal records a refused login. Catalog errors only: an internal
// error is logged by the server's reply, and the database may be what
// failed.
func (h handlers) auditRefusal(ctx context.Context, r *endpoint.Request, a authAttempt, err error) {
	var e *api.Error
	if !errors.As(err, &e) {
		return
	}
	detail := map[string]any{"code": e.Code, "message": e.Message}
	if a.email != "" {
		detail["email"] = a.email
	}
	if src := r.Source(); src != "" {
		detail["source"] = src
	}
	entry := audit.Entry{Action: a.action + "_refused", TargetType: "email", TargetID: strings.ToLower(a.email), Detail: detail}
	if a.email == "" {
		entry.TargetType = ""
	}
	meta := audit.Meta{At: h.Now(), ActorID: a.actor, CorrelationID: r.Corr}
	if werr := audit.Write(context.WithoutCancel(ctx), h.DB, meta, entry); werr != nil {
		r.Log.Warn("audit refused login", "action", entry.Action, "err", werr)
	}
}

// loginAttempt is auth.login: a password login, or the redemption of an
// invite when the request carries one.
func (h handlers) loginAttempt(_ *endpoint.Request, req api.LoginRequest) (authAttempt, error) {
	req.Email = strings.TrimSpace(req.Email)
	if req.Invite != "" {
		return h.inviteAttempt(req)
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
			resp, err := h.IDs.Login(ctx, tx, req.Email, req.Password)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			return resp, loginEffect(api.EndpointAuthLogin, resp), nil
		}}, nil
}

// inviteAttempt redeems an invite. Codes are random (130 bits), so only
// the per-source limit applies: there is no account to count against
// until the code is known to be right.
func (h handlers) inviteAttempt(req api.LoginRequest) (authAttempt, error) {
	if err := identity.ValidatePassword(req.Password); err != nil {
		return authAttempt{}, err
	}
	const action = "auth.invite_redeem"
	return authAttempt{action: action, actor: "anonymous:invite", limited: true,
		run: func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			r, err := h.IDs.RedeemInvite(ctx, tx, req.Invite, req.Email, req.Password)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			resp := r.Login
			eff := loginEffect(action, resp)
			eff.Audit = audit.Entry{Action: action, TargetType: "user", TargetID: resp.User.ID,
				Detail: map[string]any{"session_id": resp.SessionID, "revoked_sessions": r.Revoked}}
			if len(r.Revoked) > 0 {
				h.IDs.Revoking(r.Revoked...)
				eff.Events = append(eff.Events, sessionsRevoked(resp.User.ID, r.Revoked, "password_reset"))
			}
			return resp, eff, nil
		}}, nil
}

func (h handlers) exchangeAttempt(_ *endpoint.Request, req api.ExchangeRequest) (authAttempt, error) {
	if req.IDToken == "" {
		return authAttempt{}, api.Errorf(api.CodeInvalidArgument, "id_token is required")
	}
	return authAttempt{action: api.EndpointAuthExchange, actor: "anonymous:oidc",
		run: func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			resp, err := h.IDs.Exchange(ctx, tx, req.IDToken, req.Nonce)
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
