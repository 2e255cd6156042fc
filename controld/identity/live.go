package identity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// SessionLive reports whether a session exists, is not revoked and has
// not expired at now.
func SessionLive(ctx context.Context, q store.Querier, sessionID string, now time.Time) (bool, error) {
	var live bool
	err := q.QueryRow(ctx, `SELECT revoked_at IS NULL AND expires_at > $2 FROM sessions WHERE id = $1`,
		sessionID, now).Scan(&live)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("session %s: %w", sessionID, err)
	}
	return live, nil
}
