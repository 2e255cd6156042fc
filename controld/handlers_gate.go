package controld

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// gateEndpoints are the gateway's (gate.*): what sshgate's service
// principal asks for on behalf of the users who connect through it. They
// span domains (allocations, projects, nodes, the CAs, identity); gate.go
// holds what they share: auditing, and the checks of the user
// certificates they carry.
func (s *Server) gateEndpoints() []endpointDef {
	return []endpointDef{
		s.gateLogin(),
		query(s, gateproto.OpGateAuthorize, s.gateAuthorize),
		query(s, gateproto.OpGateHostCert, s.gateHostCert),
		query(s, gateproto.OpGateUserToken, s.gateUserToken),
		query(s, gateproto.OpGateSessions, s.gateSessions),
		query(s, gateproto.OpGateCredentials, s.gateCredentials),
	}
}

// gateAuthorize decides whether a user may open an allocation through the
// gateway — on the strength of the user certificate the client presented,
// whose login session must still be live — and, if so, mints a one-minute ticket for the gateway's fresh key
// and tells it where the node's terminal server is. The user must be the
// allocation's creator or an owner or member of its project (viewers may
// look, not log in); platform roles give no shell on customers' nodes.
func (s *Server) gateAuthorize(ctx context.Context, c *call, req gateproto.GateAuthorizeRequest) (*gateproto.GateAuthorizeResponse, error) {
	if err := checkGateTarget(req); err != nil {
		return nil, err
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.TicketKey))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "ticket_key is not an SSH public key: %v", err)
	}
	userCert, err := parseGateCert(req.Certificate)
	if err != nil {
		return nil, err
	}
	if api.IsVolumeID(req.AllocationID) { // sftp to a volume, no allocation: handlers_volsession.go
		return s.gateAuthorizeVolume(ctx, c, req, key, userCert)
	}
	return audited(ctx, s, c, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*gateproto.GateAuthorizeResponse, error) {
		detail := map[string]any{"user_id": req.UserID, "ticket_key": ssh.FingerprintSHA256(key),
			"certificate": ssh.FingerprintSHA256(userCert)}
		*e = audit.Entry{Action: "gate.authorize", TargetType: "allocation", TargetID: req.AllocationID, Detail: detail}
		if req.WorkloadID != "" { // ssh <workload-id>@gateway: gate_workload.go
			e.TargetType, e.TargetID = "workload", req.WorkloadID
		}
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
		allocID, err := gateWorkloadTarget(ctx, tx, req, u.ID, detail)
		if err != nil {
			return nil, err
		}
		// The user's own view: their platform role does not widen it.
		a, err := alloc.Get(ctx, tx, alloc.Actor{UserID: u.ID, Role: api.RoleUser}, allocID)
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
		cert, err := ic.SignTicket(key, sshcert.Ticket{Node: a.NodeID, Allocation: a.ID, PosixUser: posix, Workload: req.WorkloadID,
			KeyID: "ticket " + u.ID + " " + a.ID + "@" + a.NodeID, TTL: sshcert.DefaultTicketTTL}, s.now())
		if err != nil {
			return nil, certError(err)
		}
		t := marshalCert(cert)
		detail["node_id"], detail["serial"], detail["valid_before"] = a.NodeID, cert.Serial, t.ValidBefore
		banner, err := s.sessionBanner(ctx, tx, a)
		if err != nil {
			return nil, err
		}
		return &gateproto.GateAuthorizeResponse{AllocationID: a.ID, WorkloadID: req.WorkloadID, NodeID: a.NodeID, Shape: a.Shape, PosixUser: posix,
			TerminalAddr: addr, TerminalHostKey: hostKey, Ticket: t.Certificate, ValidBefore: t.ValidBefore,
			Banner: banner}, nil
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
func (s *Server) gateUserToken(ctx context.Context, c *call, req gateproto.GateUserTokenRequest) (*gateproto.GateUserTokenResponse, error) {
	if req.UserID == "" || req.Certificate == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "user_id and certificate are required")
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.Certificate))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "certificate is not an SSH certificate: %v", err)
	}
	return audited(ctx, s, c, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*gateproto.GateUserTokenResponse, error) {
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
func (s *Server) gateHostCert(ctx context.Context, c *call, req gateproto.GateHostCertRequest) (*api.SSHCertResponse, error) {
	key, err := ca.ParseSubjectKey(req.PublicKey)
	if err != nil {
		return nil, err
	}
	return audited(ctx, s, c, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*api.SSHCertResponse, error) {
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
		return &resp, nil
	})
}

// gateCredentials certifies the calling gateway's key with the internal CA
// as a gateway certificate (sshcert.SignGateway), which hostd requires
// before a ticket. Only the key of a registered gateway identity (`gpuaas
// ops nats-identity add --kind gateway`) of the caller's own name is
// certified: the gateway's session proves who calls, the registration
// which key may act as that gateway, so a stolen gateway token cannot have
// a key of its own certified. Audited like every gate.* call, refusals
// included.
func (s *Server) gateCredentials(ctx context.Context, c *call, req gateproto.GateCredentialsRequest) (*gateproto.GateCredentialsResponse, error) {
	key, err := ca.ParseSubjectKey(req.PublicKey)
	if err != nil {
		return nil, err
	}
	return audited(ctx, s, c, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*gateproto.GateCredentialsResponse, error) {
		detail := map[string]any{"key": ssh.FingerprintSHA256(key)}
		*e = audit.Entry{Action: "gate.credentials", TargetType: "gateway_key", TargetID: ssh.FingerprintSHA256(key), Detail: detail}
		reg, err := s.registeredGateway(ctx, tx, c, key)
		if err != nil {
			return nil, err
		}
		detail["name"] = reg.Name
		ic, err := s.cas.Authority(ctx, tx, api.CAInternal)
		if err != nil {
			return nil, err
		}
		cert, err := ic.SignGateway(key, reg.Name, sshcert.DefaultGatewayTTL, s.now())
		if err != nil {
			return nil, certError(err)
		}
		t := marshalCert(cert)
		detail["serial"], detail["valid_before"], detail["ca_key"] = cert.Serial, t.ValidBefore, ssh.FingerprintSHA256(ic.Active())
		return &gateproto.GateCredentialsResponse{Name: reg.Name, Certificate: t.Certificate, ValidBefore: t.ValidBefore}, nil
	})
}

// gateLogin gives a registered gateway a short-lived session token for an
// assertion signed with its key, so sshgate never holds a long-lived
// token: its seed stays on its machine and each token lives
// GatewaySessionTTL.
func (s *Server) gateLogin() endpointDef {
	return custom(s, gateproto.OpGateLogin, func(ctx context.Context, c *call, decode func() (gateproto.GateLoginRequest, error)) ([]byte, error) {
		req, err := decode()
		if err != nil {
			return nil, err
		}
		if err := s.checkGateLogin(req); err != nil {
			return nil, err
		}
		key := c.req.Headers().Get(api.HeaderIdempotencyKey)
		return s.mut.Run(ctx, mutate.Request{Endpoint: gateproto.EndpointGateLogin, ActorID: "gateway:" + req.PublicKey,
			Key: key, CorrelationID: c.corr, Fingerprint: c.req.Data(), NoReplay: true},
			func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
				id, err := busauth.LiveIdentity(ctx, tx, req.PublicKey)
				if err != nil || id.Kind != api.BusIdentityGateway {
					return nil, mutate.Effect{}, api.Errorf(api.CodeUnauthenticated, "%s is not a registered gateway key", req.PublicKey).
						WithHint("register it: `gpuaas ops nats-identity add --kind gateway`")
				}
				u, err := s.identity.EnsureServicePrincipal(ctx, tx, id.Name, api.RoleGateway)
				if err != nil {
					return nil, mutate.Effect{}, err
				}
				resp, err := s.identity.ServiceSession(ctx, tx, u, GatewaySessionTTL)
				if err != nil {
					return nil, mutate.Effect{}, err
				}
				return resp, mutate.Effect{Audit: audit.Entry{Action: gateproto.EndpointGateLogin, TargetType: "session",
					TargetID: resp.SessionID, Detail: map[string]string{"key": req.PublicKey, "user_id": u.ID}}}, nil
			})
	})
}

// gateSessions answers which of the gateway's sessions have ended. It is a
// plain read, not audited: the gateway asks every half minute, and
// nothing is minted.
func (s *Server) gateSessions(ctx context.Context, c *call, req gateproto.GateSessionsRequest) (*gateproto.GateSessionsResponse, error) {
	if len(req.Sessions) > gateproto.MaxGateSessions {
		return nil, api.Errorf(api.CodeInvalidArgument, "%d sessions in one request; at most %d", len(req.Sessions), gateproto.MaxGateSessions)
	}
	for i, r := range req.Sessions {
		if r.SessionID == "" || r.UserID == "" {
			return nil, api.Errorf(api.CodeInvalidArgument, "sessions[%d]: session_id and user_id are required", i)
		}
	}
	ended, err := identity.SessionsEnded(ctx, s.pool, req.Sessions, s.now())
	if err != nil {
		return nil, fmt.Errorf("gate sessions: %w", err)
	}
	if ended == nil {
		ended = []gateproto.GateSessionEnded{}
	}
	return &gateproto.GateSessionsResponse{Ended: ended}, nil
}
