package gate

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// authorize decides whether a user may open an allocation through the
// gateway — on the strength of the user certificate the client presented,
// whose login session must still be live — and, if so, mints a one-minute ticket for the gateway's fresh key
// and tells it where the node's terminal server is. The user must be the
// allocation's creator or an owner or member of its project (viewers may
// look, not log in); platform roles give no shell on customers' nodes.
func (h handlers) authorize(ctx context.Context, r *endpoint.Request, req gateproto.GateAuthorizeRequest) (*gateproto.GateAuthorizeResponse, error) {
	if err := checkTarget(req); err != nil {
		return nil, err
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.TicketKey))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "ticket_key is not an SSH public key: %v", err)
	}
	userCert, err := parseCert(req.Certificate)
	if err != nil {
		return nil, err
	}
	if api.IsVolumeID(req.AllocationID) { // sftp to a volume, no allocation: endpoints_volume.go
		return h.authorizeVolume(ctx, r, req, key, userCert)
	}
	return audited(ctx, h.Deps, r, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*gateproto.GateAuthorizeResponse, error) {
		detail := map[string]any{"user_id": req.UserID, "ticket_key": ssh.FingerprintSHA256(key),
			"certificate": ssh.FingerprintSHA256(userCert)}
		*e = audit.Entry{Action: "gate.authorize", TargetType: "allocation", TargetID: req.AllocationID, Detail: detail}
		if req.WorkloadID != "" { // ssh <workload-id>@gateway: workload.go
			e.TargetType, e.TargetID = "workload", req.WorkloadID
		}
		id, err := h.verifyCert(ctx, tx, userCert, req.UserID)
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
		allocID, err := workloadTarget(ctx, tx, req, u.ID, detail)
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
		auth, serial, err := h.nodeTicket(ctx, tx, a, key, "ticket "+u.ID+" "+a.ID+"@"+a.NodeID, req.WorkloadID)
		if err != nil {
			return nil, err
		}
		detail["node_id"], detail["serial"], detail["valid_before"] = a.NodeID, serial, auth.ValidBefore
		if auth.Banner, err = h.sessionBanner(ctx, tx, a); err != nil {
			return nil, err
		}
		return auth, nil
	})
}

// userToken opens a delegated session for a user who authenticated to
// the gateway with a user certificate, so `ssh gpuaas@gateway <command>`
// can act as them without their own token. The certificate is re-verified
// here against the user CA (the gateway's word is not enough: a stolen
// gateway token then cannot act as users whose certificates it does not
// hold), and the login session it names must still be live. The session ends with the certificate or after MaxDelegatedTTL,
// whichever is first, and is delegated: it mints no credentials and
// reaches no ops.* or gate.* endpoint. The token is in the response only;
// the audit row names the session, never the token.
func (h handlers) userToken(ctx context.Context, r *endpoint.Request, req gateproto.GateUserTokenRequest) (*gateproto.GateUserTokenResponse, error) {
	if req.UserID == "" || req.Certificate == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "user_id and certificate are required")
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.Certificate))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "certificate is not an SSH certificate: %v", err)
	}
	return audited(ctx, h.Deps, r, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*gateproto.GateUserTokenResponse, error) {
		detail := map[string]any{"certificate": ssh.FingerprintSHA256(key)}
		*e = audit.Entry{Action: "gate.user_token", TargetType: "user", TargetID: req.UserID, Detail: detail}
		id, err := h.verifyCert(ctx, tx, key, req.UserID)
		if err != nil {
			return nil, err
		}
		detail["serial"], detail["ca_key"], detail["cert_valid_before"] = id.Serial, id.CA, id.ValidBefore
		detail["login_session_id"] = id.SessionID
		u, err := identity.UserByID(ctx, tx, req.UserID)
		if err != nil {
			return nil, api.Errorf(api.CodeNotFound, "no user %s", req.UserID)
		}
		resp, err := h.IDs.DelegatedSession(ctx, tx, u, id.ValidBefore)
		if err != nil {
			return nil, err
		}
		detail["session_id"], detail["expires_at"] = resp.SessionID, resp.ExpiresAt
		return resp, nil
	})
}

// hostCert signs the gateway's host key with the host CA.
func (h handlers) hostCert(ctx context.Context, r *endpoint.Request, req gateproto.GateHostCertRequest) (*api.SSHCertResponse, error) {
	key, err := ca.ParseSubjectKey(req.PublicKey)
	if err != nil {
		return nil, err
	}
	return audited(ctx, h.Deps, r, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*api.SSHCertResponse, error) {
		detail := map[string]any{"principals": req.Principals, "key": ssh.FingerprintSHA256(key)}
		*e = audit.Entry{Action: "gate.host_cert", TargetType: "host_key", TargetID: ssh.FingerprintSHA256(key), Detail: detail}
		hc, err := h.CAs.Authority(ctx, tx, api.CAHost)
		if err != nil {
			return nil, err
		}
		cert, err := hc.SignHost(key, req.Principals, ca.HostCertValidity, h.Now())
		if err != nil {
			return nil, ca.CertError(err)
		}
		resp := ca.MarshalCert(cert)
		detail["serial"], detail["valid_before"] = cert.Serial, resp.ValidBefore
		return &resp, nil
	})
}

// credentials certifies the calling gateway's key with the internal CA
// as a gateway certificate (sshcert.SignGateway), which hostd requires
// before a ticket. Only the key of a registered gateway identity (`gpuaas
// ops nats-identity add --kind gateway`) of the caller's own name is
// certified: the gateway's session proves who calls, the registration
// which key may act as that gateway, so a stolen gateway token cannot have
// a key of its own certified. Audited like every gate.* call, refusals
// included.
func (h handlers) credentials(ctx context.Context, r *endpoint.Request, req gateproto.GateCredentialsRequest) (*gateproto.GateCredentialsResponse, error) {
	key, err := ca.ParseSubjectKey(req.PublicKey)
	if err != nil {
		return nil, err
	}
	return audited(ctx, h.Deps, r, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*gateproto.GateCredentialsResponse, error) {
		detail := map[string]any{"key": ssh.FingerprintSHA256(key)}
		*e = audit.Entry{Action: "gate.credentials", TargetType: "gateway_key", TargetID: ssh.FingerprintSHA256(key), Detail: detail}
		reg, err := registeredGateway(ctx, tx, r, key)
		if err != nil {
			return nil, err
		}
		detail["name"] = reg.Name
		ic, err := h.CAs.Authority(ctx, tx, api.CAInternal)
		if err != nil {
			return nil, err
		}
		cert, err := ic.SignGateway(key, reg.Name, sshcert.DefaultGatewayTTL, h.Now())
		if err != nil {
			return nil, ca.CertError(err)
		}
		t := ca.MarshalCert(cert)
		detail["serial"], detail["valid_before"], detail["ca_key"] = cert.Serial, t.ValidBefore, ssh.FingerprintSHA256(ic.Active())
		return &gateproto.GateCredentialsResponse{Name: reg.Name, Certificate: t.Certificate, ValidBefore: t.ValidBefore}, nil
	})
}

// sessions answers which of the gateway's sessions have ended. It is a
// plain read, not audited: the gateway asks every half minute, and
// nothing is minted.
func (h handlers) sessions(ctx context.Context, _ *endpoint.Request, req gateproto.GateSessionsRequest) (*gateproto.GateSessionsResponse, error) {
	if len(req.Sessions) > gateproto.MaxGateSessions {
		return nil, api.Errorf(api.CodeInvalidArgument, "%d sessions in one request; at most %d", len(req.Sessions), gateproto.MaxGateSessions)
	}
	for i, r := range req.Sessions {
		if r.SessionID == "" || r.UserID == "" {
			return nil, api.Errorf(api.CodeInvalidArgument, "sessions[%d]: session_id and user_id are required", i)
		}
	}
	ended, err := identity.SessionsEnded(ctx, h.DB, req.Sessions, h.Now())
	if err != nil {
		return nil, fmt.Errorf("gate sessions: %w", err)
	}
	if ended == nil {
		ended = []gateproto.GateSessionEnded{}
	}
	return &gateproto.GateSessionsResponse{Ended: ended}, nil
}
