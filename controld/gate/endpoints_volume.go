package gate

import (
	"context"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// authorizeVolume is gate.authorize for a volume id
// (`sftp <volume-id>@gateway`, docs/volumes.md "Data without a GPU"): the
// user certificate is checked as for an allocation, the volume is held
// for the session (volumes.OpenSession: who may, and that nothing else
// has it), its node must be up and serving a terminal, and the ticket
// names the volume where an allocation would be; the node serves it with
// sftp alone. Audited as volume.session_start (a refusal as
// volume.session_start_refused). Nothing is billed: no allocation exists.
func (h handlers) authorizeVolume(ctx context.Context, r *endpoint.Request, req gateproto.GateAuthorizeRequest, key, userCert ssh.PublicKey) (*gateproto.GateAuthorizeResponse, error) {
	return audited(ctx, h.Deps, r, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*gateproto.GateAuthorizeResponse, error) {
		detail := map[string]any{"user_id": req.UserID, "ticket_key": ssh.FingerprintSHA256(key),
			"certificate": ssh.FingerprintSHA256(userCert)}
		*e = audit.Entry{Action: "volume.session_start", TargetType: "volume", TargetID: req.AllocationID, Detail: detail}
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
		now := h.Now()
		v, evs, err := volumes.OpenSession(ctx, tx, req.AllocationID, u.ID, ssh.FingerprintSHA256(key), now)
		if err != nil {
			return nil, err
		}
		e.ProjectID = v.ProjectID
		detail["volume"], detail["node_id"] = v.Name, v.NodeID
		nd, err := node.Get(ctx, tx, v.NodeID)
		if err != nil {
			return nil, err
		}
		if st := nd.Node.State; st != api.NodeReady && st != api.NodeDraining {
			return nil, api.Errorf(api.CodeUnavailable, "volume %s's node %s is %s", v.Name, v.Node, st).
				WithHint("a volume lives on its node: try again when the node is back")
		}
		addr, hostKey, err := node.Terminal(ctx, tx, v.NodeID)
		if err != nil {
			return nil, err
		}
		if addr == "" || hostKey == "" {
			return nil, api.Errorf(api.CodeUnavailable, "volume %s's node %s serves no terminal", v.Name, v.Node).
				WithHint("an operator should check the node's hostd")
		}
		ic, err := h.CAs.Authority(ctx, tx, api.CAInternal)
		if err != nil {
			return nil, err
		}
		posix := api.PosixUser(v.ID)
		cert, err := ic.SignTicket(key, sshcert.Ticket{Node: v.NodeID, Allocation: v.ID, PosixUser: posix,
			KeyID: "volume ticket " + u.ID + " " + v.ID + "@" + v.NodeID, TTL: sshcert.DefaultTicketTTL}, now)
		if err != nil {
			return nil, ca.CertError(err)
		}
		for _, ev := range evs {
			if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
				return nil, err
			}
		}
		t := ca.MarshalCert(cert)
		detail["serial"], detail["valid_before"] = cert.Serial, t.ValidBefore
		return &gateproto.GateAuthorizeResponse{AllocationID: v.ID, NodeID: v.NodeID, PosixUser: posix,
			TerminalAddr: addr, TerminalHostKey: hostKey, Ticket: t.Certificate, ValidBefore: t.ValidBefore}, nil
	})
}
