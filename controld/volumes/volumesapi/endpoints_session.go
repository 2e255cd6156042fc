package volumesapi

import (
	"context"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// gateVolumeEnd is gate.volume_end: the gateway's word that a volume
// session's link to the node is closed (the node unmounts the volume
// before it ends the sftp channel), so the volume is ready again.
// Audited as volume.session_end; ending a hold that is gone (told twice,
// or taken over after its lease) changes nothing and says so.
func (h handlers) gateVolumeEnd(ctx context.Context, r *endpoint.Request, req gateproto.GateVolumeEndRequest) (*gateproto.GateVolumeEndResponse, error) {
	if !api.IsVolumeID(req.VolumeID) {
		return nil, api.Errorf(api.CodeInvalidArgument, "volume_id %q is not a volume id", req.VolumeID)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.TicketKey))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "ticket_key is not an SSH public key: %v", err)
	}
	var resp *gateproto.GateVolumeEndResponse
	err = h.Audited(ctx, r, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) error {
		detail := map[string]any{"ticket_key": ssh.FingerprintSHA256(key)}
		*e = audit.Entry{Action: "volume.session_end", TargetType: "volume", TargetID: req.VolumeID, Detail: detail}
		now := h.Now()
		v, evs, released, err := volumes.EndSession(ctx, tx, req.VolumeID, ssh.FingerprintSHA256(key), now)
		if err != nil {
			return err
		}
		detail["released"] = released
		if released {
			e.ProjectID = v.ProjectID
		}
		for _, ev := range evs {
			if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
				return err
			}
		}
		resp = &gateproto.GateVolumeEndResponse{Released: released}
		return nil
	})
	return resp, err
}
