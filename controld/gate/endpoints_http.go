package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/exposures"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// authorizeHTTP is the HTTPS front's question about a request for an
// exposure (docs/expose.md): the verdict, and with a ticket key a ticket
// for the allocation's node, as gate.authorize gives the SSH front. The
// rules are SSH's: the caller's login must be live (logout and a disabled
// account end it), the allocation active, and the caller its exposure's
// creator (share me) or an owner or member of its project (share
// project); platform roles widen nothing. Public exposures need no
// credential. Verdicts are answers, not errors, so the front can tell a
// login page from 403, 404 and 410; only a ticket is audited (the
// verdicts the front refreshes every few seconds are not).
func (h handlers) authorizeHTTP(ctx context.Context, r *endpoint.Request, req gateproto.GateAuthorizeHTTPRequest) (*gateproto.GateAuthorizeHTTPResponse, error) {
	allocID, port, ok := api.ParseExposureHost(strings.ToLower(strings.TrimSpace(req.Host)))
	if !ok {
		return nil, api.Errorf(api.CodeInvalidArgument, "host: %q is not <port>-<allocation>", req.Host)
	}
	if (req.SessionID == "") != (req.UserID == "") {
		return nil, api.Errorf(api.CodeInvalidArgument, "session_id and user_id go together")
	}
	var key ssh.PublicKey
	if req.TicketKey != "" {
		var err error
		if key, _, _, _, err = ssh.ParseAuthorizedKey([]byte(req.TicketKey)); err != nil {
			return nil, api.Errorf(api.CodeInvalidArgument, "ticket_key is not an SSH public key: %v", err)
		}
	}
	v, a, err := h.HTTPVerdict(ctx, h.DB, allocID, port, req)
	if err != nil || v.Verdict != gateproto.VerdictAllow || key == nil {
		return v, err
	}
	return audited(ctx, h.Deps, r, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*gateproto.GateAuthorizeHTTPResponse, error) {
		detail := map[string]any{"user_id": v.UserID, "session_id": v.SessionID, "exposure_id": v.Exposure.ID,
			"ticket_key": ssh.FingerprintSHA256(key)}
		*e = audit.Entry{Action: gateproto.EndpointGateAuthorizeHTTP, TargetType: "allocation", TargetID: a.ID,
			ProjectID: a.ProjectID, Detail: detail}
		auth, _, err := h.nodeTicket(ctx, tx, a, key, "ticket http "+v.UserID+" "+a.ID+"@"+a.NodeID, "")
		if err != nil {
			return nil, err
		}
		detail["node_id"], detail["valid_before"] = a.NodeID, auth.ValidBefore
		v.Auth = auth
		return v, nil
	})
}

// HTTPVerdict decides gate.authorize_http's request for port of allocID,
// and returns the allocation when allowed (expose.link asks it too:
// exposures.Deps).
func (d Deps) HTTPVerdict(ctx context.Context, q store.Batcher, allocID string, port int, req gateproto.GateAuthorizeHTTPRequest) (*gateproto.GateAuthorizeHTTPResponse, api.Allocation, error) {
	now := d.Now()
	v := &gateproto.GateAuthorizeHTTPResponse{CacheUntil: now.Add(gateproto.MaxHTTPVerdictCache)}
	deny := func(verdict, reason string, args ...any) (*gateproto.GateAuthorizeHTTPResponse, api.Allocation, error) {
		v.Verdict, v.Reason = verdict, fmt.Sprintf(reason, args...)
		return v, api.Allocation{}, nil
	}
	e, found, err := exposures.ByHost(ctx, q, allocID, port)
	if err != nil {
		return nil, api.Allocation{}, err
	}
	if !found {
		return deny(gateproto.VerdictNotFound, "port %d of %s is not exposed", port, allocID)
	}
	v.Exposure = &e
	switch {
	case e.RemovedAt != nil:
		return deny(gateproto.VerdictGone, "this exposure ended (%s)", e.Ended)
	case !now.Before(e.ExpiresAt):
		return deny(gateproto.VerdictGone, "this exposure expired at %s", e.ExpiresAt.Format("2006-01-02 15:04:05 MST"))
	}
	if e.ExpiresAt.Before(v.CacheUntil) {
		v.CacheUntil = e.ExpiresAt
	}
	// The platform's view of the allocation: who may see it is decided
	// below, by the exposure's share.
	a, err := alloc.Get(ctx, q, alloc.Actor{Role: api.RoleAdmin}, allocID)
	if err != nil {
		if api.CodeOf(err) == api.CodeNotFound {
			return deny(gateproto.VerdictGone, "allocation %s is gone", allocID)
		}
		return nil, api.Allocation{}, err
	}
	if a.State != api.AllocActive {
		return deny(gateproto.VerdictGone, "allocation %s is %s", a.ID, a.State)
	}
	if e.Share == api.SharePublic {
		v.Verdict = gateproto.VerdictAllow
		return v, a, nil
	}
	userID, sessionID, why, err := d.httpCaller(ctx, q, req)
	if err != nil {
		return nil, api.Allocation{}, err
	}
	if why != "" {
		return deny(gateproto.VerdictLogin, "%s", why)
	}
	v.UserID, v.SessionID = userID, sessionID
	if userID != e.CreatedBy {
		if e.Share == api.ShareMe {
			return deny(gateproto.VerdictForbidden, "this exposure is shared with its creator only")
		}
		role, err := project.RoleOf(ctx, q, e.ProjectID, userID)
		if err != nil {
			return nil, api.Allocation{}, err
		}
		if role != api.ProjectOwner && role != api.ProjectMember {
			return deny(gateproto.VerdictForbidden, "this exposure is shared with its project's owners and members")
		}
	}
	v.Verdict = gateproto.VerdictAllow
	return v, a, nil
}

// httpCaller is the login a request comes with: its bearer (a session or
// machine token) or the login session its cookie is bound to. why says
// what is missing or ended when there is none.
func (d Deps) httpCaller(ctx context.Context, q store.Querier, req gateproto.GateAuthorizeHTTPRequest) (userID, sessionID, why string, err error) {
	switch {
	case req.Bearer != "":
		p, err := d.IDs.Authenticate(ctx, q, "Bearer "+req.Bearer)
		if err != nil {
			var ae *api.Error
			if errors.As(err, &ae) && ae.Code == api.CodeUnauthenticated {
				return "", "", ae.Message, nil
			}
			return "", "", "", err
		}
		sid := p.SessionID
		if p.TokenID != "" {
			sid = p.TokenID
		}
		return p.UserID, sid, "", nil
	case req.SessionID != "":
		ended, err := identity.SessionsEnded(ctx, q, []gateproto.GateSession{{SessionID: req.SessionID, UserID: req.UserID}}, d.Now())
		if err != nil {
			return "", "", "", err
		}
		if len(ended) > 0 {
			return "", "", "your login ended (" + ended[0].Reason + ")", nil
		}
		return req.UserID, req.SessionID, "", nil
	}
	return "", "", "this exposure needs a login", nil
}

// nodeTicket signs a one-minute ticket for key to reach allocation a's
// node (workloadID's container in it, when not ""), and says where the
// node's terminal server is: the part of gate.authorize's and
// gate.authorize_http's answers the core dials with. serial is the
// ticket's, for the audit row.
func (h handlers) nodeTicket(ctx context.Context, tx pgx.Tx, a api.Allocation, key ssh.PublicKey, keyID, workloadID string) (
	auth *gateproto.GateAuthorizeResponse, serial uint64, err error) {
	addr, hostKey, err := node.Terminal(ctx, tx, a.NodeID)
	if err != nil {
		return nil, 0, err
	}
	if addr == "" || hostKey == "" {
		return nil, 0, api.Errorf(api.CodeUnavailable, "the node of allocation %s serves no terminal", a.ID).
			WithHint("an operator should check the node's hostd")
	}
	ic, err := h.CAs.Authority(ctx, tx, api.CAInternal)
	if err != nil {
		return nil, 0, err
	}
	posix := api.PosixUser(a.ID)
	cert, err := ic.SignTicket(key, sshcert.Ticket{Node: a.NodeID, Allocation: a.ID, PosixUser: posix, Workload: workloadID,
		KeyID: keyID, TTL: sshcert.DefaultTicketTTL}, h.Now())
	if err != nil {
		return nil, 0, ca.CertError(err)
	}
	t := ca.MarshalCert(cert)
	return &gateproto.GateAuthorizeResponse{AllocationID: a.ID, WorkloadID: workloadID, NodeID: a.NodeID, Shape: a.Shape, PosixUser: posix,
		TerminalAddr: addr, TerminalHostKey: hostKey, Ticket: t.Certificate, ValidBefore: t.ValidBefore}, cert.Serial, nil
}
