package controld

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// audited runs a gateway query in a transaction that also writes its audit
// row, so no credential leaves controld without a trace. These calls mint
// short-lived credentials but change no domain state, so they are queries:
// no Idempotency-Key, and a retry simply mints afresh. fn fills the entry
// even when it refuses; a refusal is then audited on its own (the
// transaction holding the attempt is rolled back).
func (s *Server) audited(ctx context.Context, c *call, fn func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (any, error)) (any, error) {
	var e audit.Entry
	var resp any
	meta := audit.Meta{ActorID: c.principal.UserID, CorrelationID: c.corr}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if resp, err = fn(ctx, tx, &e); err != nil {
			return err
		}
		meta.At = s.now()
		return audit.Write(ctx, tx, meta, e)
	})
	var apiErr *api.Error
	if err != nil && errors.As(err, &apiErr) && e.Action != "" {
		meta.At = s.now()
		e.Action += "_refused"
		e.Detail = map[string]any{"request": e.Detail, "code": apiErr.Code, "message": apiErr.Message}
		if werr := audit.Write(ctx, s.pool, meta, e); werr != nil {
			s.cfg.Log.Warn("audit refusal", "action", e.Action, "err", werr)
		}
	}
	return resp, err
}

// gateAuthorize decides whether a user may open an allocation through the
// gateway — on the strength of the user certificate the client presented,
// whose login session must still be live — and, if so, mints a one-minute ticket for the gateway's fresh key
// and tells it where the node's terminal server is. The user must be the
// allocation's creator or an owner or member of its project (viewers may
// look, not log in); platform roles give no shell on customers' nodes.
func (s *Server) gateAuthorize(ctx context.Context, c *call) (any, error) {
	var req api.GateAuthorizeRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.AllocationID == "" || req.UserID == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "allocation_id and user_id are required")
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.TicketKey))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "ticket_key is not an SSH public key: %v", err)
	}
	userCert, err := parseGateCert(req.Certificate)
	if err != nil {
		return nil, err
	}
	return s.audited(ctx, c, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (any, error) {
		detail := map[string]any{"user_id": req.UserID, "ticket_key": ssh.FingerprintSHA256(key),
			"certificate": ssh.FingerprintSHA256(userCert)}
		*e = audit.Entry{Action: "gate.authorize", TargetType: "allocation", TargetID: req.AllocationID, Detail: detail}
		id, err := s.verifyGateCert(ctx, tx, userCert, req.UserID)
		detail["session_id"] = id.SessionID
		if err != nil {
			return nil, err
		}
		u, err := identity.UserByID(ctx, tx, req.UserID)
		if err != nil {
			return nil, api.Errorf(api.CodeNotFound, "no user %s", req.UserID)
		}
		if u.Provider == api.ProviderService {
			return nil, api.Errorf(api.CodeForbidden, "%s is a service principal", u.Email)
		}
		// The user's own view: their platform role does not widen it.
		a, err := alloc.Get(ctx, tx, alloc.Actor{UserID: u.ID, Role: api.RoleUser}, req.AllocationID)
		if err != nil {
			return nil, err
		}
		e.ProjectID = a.ProjectID
		role, err := project.RoleOf(ctx, tx, a.ProjectID, u.ID)
		if err != nil {
			return nil, err
		}
		if a.UserID != u.ID && role != api.ProjectOwner && role != api.ProjectMember {
			return nil, api.Errorf(api.CodeForbidden, "%s is a %s of the allocation's project; a shell needs owner or member", u.Email, role).
				WithHint("ask a project owner: `gpuaas project add-member --role member`")
		}
		if a.State != api.AllocActive {
			return nil, api.Errorf(api.CodeConflict, "allocation %s is %s, not active", a.ID, a.State).
				WithHint("see `gpuaas alloc get " + a.ID + "`")
		}
		addr, hostKey, err := node.Terminal(ctx, tx, a.NodeID)
		if err != nil {
			return nil, err
		}
		if addr == "" || hostKey == "" {
			return nil, api.Errorf(api.CodeUnavailable, "the node of allocation %s serves no terminal", a.ID).
				WithHint("an operator should check the node's hostd")
		}
		ic, err := s.cas.Authority(ctx, tx, api.CAInternal)
		if err != nil {
			return nil, err
		}
		posix := api.PosixUser(a.ID)
		cert, err := ic.SignTicket(key, sshcert.Ticket{Node: a.NodeID, Allocation: a.ID, PosixUser: posix,
			KeyID: "ticket " + u.ID + " " + a.ID + "@" + a.NodeID, TTL: sshcert.DefaultTicketTTL}, s.now())
		if err != nil {
			return nil, certError(err)
		}
		t := marshalCert(cert)
		detail["node_id"], detail["serial"], detail["valid_before"] = a.NodeID, cert.Serial, t.ValidBefore
		return api.GateAuthorizeResponse{AllocationID: a.ID, NodeID: a.NodeID, Shape: a.Shape, PosixUser: posix,
			TerminalAddr: addr, TerminalHostKey: hostKey, Ticket: t.Certificate, ValidBefore: t.ValidBefore}, nil
	})
}

// gateUserToken opens a delegated session for a user who authenticated to
// the gateway with a user certificate, so `ssh gpuaas@gateway <command>`
// can act as them without their own token. The certificate is re-verified
// here against the user CA (the gateway's word is not enough: a stolen
// gateway token then cannot act as users whose certificates it does not
// hold), and the login session it names must still be live. The session ends with the certificate or after MaxDelegatedTTL,
// whichever is first, and is delegated: it mints no credentials and
// reaches no ops.* or gate.* endpoint. The token is in the response only;
// the audit row names the session, never the token.
func (s *Server) gateUserToken(ctx context.Context, c *call) (any, error) {
	var req api.GateUserTokenRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.UserID == "" || req.Certificate == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "user_id and certificate are required")
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.Certificate))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "certificate is not an SSH certificate: %v", err)
	}
	return s.audited(ctx, c, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (any, error) {
		detail := map[string]any{"certificate": ssh.FingerprintSHA256(key)}
		*e = audit.Entry{Action: "gate.user_token", TargetType: "user", TargetID: req.UserID, Detail: detail}
		id, err := s.verifyGateCert(ctx, tx, key, req.UserID)
		if err != nil {
			return nil, err
		}
		detail["serial"], detail["ca_key"], detail["cert_valid_before"] = id.Serial, id.CA, id.ValidBefore
		detail["login_session_id"] = id.SessionID
		u, err := identity.UserByID(ctx, tx, req.UserID)
		if err != nil {
			return nil, api.Errorf(api.CodeNotFound, "no user %s", req.UserID)
		}
		resp, err := s.identity.DelegatedSession(ctx, tx, u, id.ValidBefore)
		if err != nil {
			return nil, err
		}
		detail["session_id"], detail["expires_at"] = resp.SessionID, resp.ExpiresAt
		return resp, nil
	})
}

// gateHostCert signs the gateway's host key with the host CA.
func (s *Server) gateHostCert(ctx context.Context, c *call) (any, error) {
	var req api.GateHostCertRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.PublicKey))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "public_key is not an SSH public key: %v", err)
	}
	return s.audited(ctx, c, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (any, error) {
		detail := map[string]any{"principals": req.Principals, "key": ssh.FingerprintSHA256(key)}
		*e = audit.Entry{Action: "gate.host_cert", TargetType: "host_key", TargetID: ssh.FingerprintSHA256(key), Detail: detail}
		hc, err := s.cas.Authority(ctx, tx, api.CAHost)
		if err != nil {
			return nil, err
		}
		cert, err := hc.SignHost(key, req.Principals, HostCertValidity, s.now())
		if err != nil {
			return nil, certError(err)
		}
		resp := marshalCert(cert)
		detail["serial"], detail["valid_before"] = cert.Serial, resp.ValidBefore
		return resp, nil
	})
}

func (s *Server) sessionStart(_ context.Context, c *call) (mutate.Func, error) {
	var req api.SessionStartRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Gateway) == "" {
		req.Gateway = c.principal.Email
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		ts, err := sessions.Start(ctx, tx, req, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return ts, sessionEffect("session.start", ts), nil
	}, nil
}

func (s *Server) sessionEnd(_ context.Context, c *call) (mutate.Func, error) {
	var req api.SessionEndRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		ts, err := sessions.End(ctx, tx, req, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return ts, sessionEffect("session.end", ts), nil
	}, nil
}

// sessionEffect audits a session change and tells the session's user.
func sessionEffect(kind string, ts api.TerminalSession) mutate.Effect {
	return mutate.Effect{
		Audit: audit.Entry{Action: kind, TargetType: "terminal_session", TargetID: ts.ID,
			Detail: map[string]any{"user_id": ts.UserID, "allocation_id": ts.AllocationID, "kind": ts.Kind}},
		Events: []outbox.Event{{Kind: kind, Subject: ts.ID, Users: []string{ts.UserID}, Payload: ts}},
	}
}

func (s *Server) viewer(c *call) sessions.Viewer {
	return sessions.Viewer{UserID: c.principal.UserID, Operator: c.principal.IsOperator()}
}

func (s *Server) sessionList(ctx context.Context, c *call) (any, error) {
	var req api.SessionListRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	list, err := sessions.List(ctx, s.pool, s.viewer(c), req)
	if err != nil {
		return nil, err
	}
	return api.SessionListResponse{Sessions: list}, nil
}

func (s *Server) sessionGet(ctx context.Context, c *call) (any, error) {
	var req api.SessionRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return sessions.Get(ctx, s.pool, s.viewer(c), req.ID)
}
