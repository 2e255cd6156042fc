package volumes

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Claim is the volumes an allocation asked for, locked in its creating
// transaction: where they are (every one on the same node) and what its
// provisioning mounts.
type Claim struct {
	NodeID      string
	NodeName    string
	Attachments []api.VolumeAttachment
}

// Reserve locks the volumes of mounts (in project projectID) for an
// allocation being made and checks each can be attached: ready (not
// attached to another allocation, being made, removed or failed), all on
// one node, no volume or path twice, no path inside another. Nothing is
// changed until Attach.
func Reserve(ctx context.Context, tx pgx.Tx, projectID string, mounts []api.VolumeMount, now time.Time) (Claim, error) {
	var c Claim
	seen := map[string]bool{}
	for _, m := range mounts {
		v, err := getForUpdate(ctx, tx, projectID, strings.TrimSpace(m.Volume))
		if err != nil {
			return Claim{}, err
		}
		switch {
		case v.State == api.VolumeReady:
		case v.State == api.VolumeAttached && sessionOver(v, now):
			// A session whose gateway never said it ended (volsession.go).
		case v.State == api.VolumeAttached && v.Session != nil:
			return Claim{}, sessionConflict(v)
		case v.State == api.VolumeAttached:
			return Claim{}, api.Errorf(api.CodeConflict, "volume %s is attached to allocation %s", v.Name, v.AllocationID).
				WithHint("a volume is in one allocation at a time: release " + v.AllocationID + " first")
		case v.AllocationID != "":
			return Claim{}, api.Errorf(api.CodeConflict, "volume %s is %s allocation %s", v.Name, heldWord(v.State), v.AllocationID)
		default:
			return Claim{}, api.Errorf(api.CodeConflict, "volume %s is %s: only a ready volume is attached", v.Name, v.State)
		}
		if seen[v.ID] {
			return Claim{}, api.Errorf(api.CodeInvalidArgument, "volume %s is asked for twice", v.Name)
		}
		seen[v.ID] = true
		switch {
		case c.NodeID == "":
			c.NodeID, c.NodeName = v.NodeID, v.Node
		case c.NodeID != v.NodeID:
			return Claim{}, api.Errorf(api.CodeInvalidArgument, "volumes %s and %s are on different nodes (%s, %s): an allocation is on one node",
				c.Attachments[0].Name, v.Name, c.NodeName, v.Node)
		}
		path := m.Path
		if path == "" {
			path = api.DefaultMountPath(v.Name)
		}
		if err := api.CheckMountPath(path); err != nil {
			return Claim{}, err
		}
		for _, o := range c.Attachments {
			if nested(o.Path, path) {
				return Claim{}, api.Errorf(api.CodeInvalidArgument, "mount paths %s and %s overlap", o.Path, path)
			}
		}
		c.Attachments = append(c.Attachments, api.VolumeAttachment{VolumeID: v.ID, Name: v.Name, Path: path})
	}
	return c, nil
}

// nested reports whether one path is the other or inside it.
func nested(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// Attach marks the claimed volumes attached to allocationID at their
// paths and returns their events.
func Attach(ctx context.Context, tx pgx.Tx, c Claim, allocationID string, now time.Time) ([]outbox.Event, error) {
	var evs []outbox.Event
	for _, a := range c.Attachments {
		v, err := update(ctx, tx, a.VolumeID, `state = 'attached', allocation_id = $2, mount_path = $3, reason = '',
			session_key = NULL, session_by = NULL, session_at = NULL`, now,
			allocationID, a.Path)
		if err != nil {
			return nil, fmt.Errorf("attach volume: %w", err)
		}
		// A session hold past its lease was taken over: its row ends.
		if _, err := sessions.EndVolume(ctx, tx, v.ID, true, now); err != nil {
			return nil, err
		}
		ev, err := event(ctx, tx, v)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Detach makes the volumes of allocationID ready again, once its node
// has unmounted them (its release succeeded), and returns their events.
func Detach(ctx context.Context, tx pgx.Tx, allocationID string, now time.Time) ([]outbox.Event, error) {
	rows, err := tx.Query(ctx, `UPDATE volumes SET state = 'ready', allocation_id = NULL, mount_path = '', updated_at = $2
		WHERE allocation_id = $1 RETURNING `+columns, allocationID, now)
	if err != nil {
		return nil, fmt.Errorf("detach volumes of %s: %w", allocationID, err)
	}
	vs, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("detach volumes of %s: %w", allocationID, err)
	}
	var evs []outbox.Event
	for _, v := range vs {
		ev, err := event(ctx, tx, v)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
