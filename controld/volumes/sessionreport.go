package volumes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SessionReportGrace is how old a session hold must be before a node's
// report that lacks it lets it go: the node mounts the volume only when
// the gateway's link arrives after gate.authorize (and checks the
// filesystem first), and a heartbeat carries a probe up to 30 s old.
const SessionReportGrace = 2 * time.Minute

// LostSessionReason is the audited reason a hold the node no longer has
// is let go.
const LostSessionReason = "node_reported_no_session"

// sessionInventory is the part of a node's health probe that lists the
// volumes mounted for an sftp session now
// (hostd/tasks.HealthReport.VolumeSessions): absent from a node that
// keeps no volumes, could not list them, or predates the list, which
// proves nothing.
type sessionInventory struct {
	Sessions *[]string `json:"volume_sessions"`
}

// LostSession is a session hold let go because its node no longer has
// it: Volume is the volume as it was (Session names whose it was), Key
// the session's ticket key fingerprint.
type LostSession struct {
	Volume api.Volume
	Key    string
	Event  outbox.Event
}

// EndLostSessions lets go of the session holds on nodeID's volumes that
// its health report says it no longer has (docs/volumes.md, "When a
// gateway dies"): a gateway that dies mid-session never sends
// gate.volume_end, but the node unmounts the volume as soon as the link
// drops, so each hold older than SessionReportGrace whose volume the
// report does not list as in a session ends now — the volume is ready
// again, with its event — instead of at the lease's end
// (api.VolumeSessionMax + SessionMargin). A report without the list
// changes nothing. The caller audits each as volume.session_end.
func EndLostSessions(ctx context.Context, tx pgx.Tx, nodeID string, health json.RawMessage, now time.Time) ([]LostSession, error) {
	var inv sessionInventory
	if len(health) == 0 || json.Unmarshal(health, &inv) != nil || inv.Sessions == nil {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT `+columns+`, session_key FROM volumes WHERE node_id = $1 AND state = 'attached'
		AND session_key IS NOT NULL AND session_at < $2 AND NOT (id = ANY($3)) ORDER BY id FOR UPDATE`,
		nodeID, now.Add(-SessionReportGrace), *inv.Sessions)
	if err != nil {
		return nil, fmt.Errorf("check volume sessions of node %s: %w", nodeID, err)
	}
	var lost []LostSession
	for rows.Next() {
		var l LostSession
		if l.Volume, err = scanWith(rows, &l.Key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("check volume sessions of node %s: %w", nodeID, err)
		}
		lost = append(lost, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check volume sessions of node %s: %w", nodeID, err)
	}
	for i, l := range lost {
		_, evs, released, err := endSession(ctx, tx, l.Volume.ID, l.Key, true, now)
		if err != nil {
			return nil, err
		}
		if !released || len(evs) != 1 {
			return nil, fmt.Errorf("end volume session of %s: not held", l.Volume.ID)
		}
		lost[i].Event = evs[0]
	}
	return lost, nil
}
