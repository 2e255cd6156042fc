package identity

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/controld/store"
)

// Prune deletes what identity keeps only for a while: exchanged ID tokens
// past their expiry, expired invites, and failed-login counts older than
// the longest window. Safe on every replica.
func (s *Service) Prune(ctx context.Context, q store.Querier) error {
	now := s.cfg.Now().UTC()
	window := s.cfg.LoginLimits.window()
	for _, p := range []struct {
		what, sql string
		before    time.Time
	}{
		{"exchanged id tokens", `DELETE FROM oidc_exchanged_tokens WHERE expires_at < $1`, now},
		// Expired invites stay a while, so that a late invitee is told "expired".
		{"expired invites", `DELETE FROM user_invites WHERE expires_at < $1`, now.Add(-30 * 24 * time.Hour)},
		{"login attempts", `DELETE FROM login_attempts WHERE last_failure_at < $1`, now.Add(-window)},
	} {
		if _, err := q.Exec(ctx, p.sql, p.before); err != nil {
			return fmt.Errorf("prune %s: %w", p.what, err)
		}
	}
	return nil
}
