package controld

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/volumes"
)

// endLostSessions lets go of the volume session holds a node's health
// report says it no longer has (volumes.EndLostSessions: a gateway that
// died mid-session), each audited as volume.session_end by the node with
// the reason, and returns their events.
func endLostSessions(ctx context.Context, tx pgx.Tx, nodeID string, health json.RawMessage, now time.Time) ([]outbox.Event, error) {
	lost, err := volumes.EndLostSessions(ctx, tx, nodeID, health, now)
	if err != nil {
		return nil, err
	}
	evs := make([]outbox.Event, 0, len(lost))
	for _, l := range lost {
		detail := map[string]any{"released": true, "reason": volumes.LostSessionReason, "ticket_key": l.Key, "node_id": nodeID}
		if s := l.Volume.Session; s != nil {
			detail["user_id"], detail["since"] = s.UserID, s.Since
		}
		if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: "node:" + nodeID}, audit.Entry{Action: "volume.session_end",
			TargetType: "volume", TargetID: l.Volume.ID, ProjectID: l.Volume.ProjectID, Detail: detail}); err != nil {
			return nil, err
		}
		evs = append(evs, l.Event)
	}
	return evs, nil
}
