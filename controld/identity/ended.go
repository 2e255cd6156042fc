package identity

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// SessionsEnded returns those of refs whose session is no longer good for
// the user it names at now: revoked (logout, a disabled user), expired, or
// unknown — no such session, or one of another user (told apart from a
// missing one nowhere, so a gateway learns nothing about other users'
// sessions). Delegated sessions never count as live here: a certificate
// is only ever minted under a user's own login. One query, whatever the
// number of refs.
func SessionsEnded(ctx context.Context, q store.Querier, refs []gateproto.GateSession, now time.Time) ([]gateproto.GateSessionEnded, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.SessionID
	}
	// A token's connections name the token as their session, and its
	// principal is the token itself; it ends with its creator's account
	// too (docs/tokens.md).
	rows, err := q.Query(ctx, `SELECT id, user_id, revoked_at IS NOT NULL, expires_at, delegated
		FROM sessions WHERE id = ANY($1)
		UNION ALL SELECT t.id, t.id, t.revoked_at IS NOT NULL OR c.disabled_at IS NOT NULL, t.expires_at, false
		FROM api_tokens t JOIN users c ON c.id = t.created_by WHERE t.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("check sessions: %w", err)
	}
	defer rows.Close()
	type row struct {
		user      string
		revoked   bool
		expires   time.Time
		delegated bool
	}
	found := make(map[string]row, len(refs))
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.user, &r.revoked, &r.expires, &r.delegated); err != nil {
			return nil, fmt.Errorf("check sessions: %w", err)
		}
		found[id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check sessions: %w", err)
	}
	var ended []gateproto.GateSessionEnded
	for _, ref := range refs {
		r, ok := found[ref.SessionID]
		reason := ""
		switch {
		case !ok || r.user != ref.UserID || r.delegated:
			reason = gateproto.SessionEndedUnknown
		case r.revoked:
			reason = gateproto.SessionEndedRevoked
		case !now.Before(r.expires):
			reason = gateproto.SessionEndedExpired
		default:
			continue
		}
		ended = append(ended, gateproto.GateSessionEnded{GateSession: ref, Reason: reason})
	}
	return ended, nil
}
