package idle

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SetProjectPolicy sets a project's idle period (0 is off) and returns it
// with the running allocations it applies to. A new or changed period
// starts the idle clock of those allocations now (the policy's
// updated_at; see state.idleSince): setting a period never releases a
// running allocation before its warning went out (docs/idle.md). Setting
// the period it already has changes nothing, the clock included.
func (s Settings) SetProjectPolicy(ctx context.Context, q store.Querier, p api.Project, seconds int64, now time.Time) (api.ProjectPolicy, error) {
	now = now.UTC()
	pol := api.ProjectPolicy{ProjectID: p.ID, Project: p.Name, IdleReleaseAfterSeconds: seconds, UpdatedAt: now}
	if seconds == 0 {
		if _, err := q.Exec(ctx, `DELETE FROM idle_project_policies WHERE project_id = $1`, p.ID); err != nil {
			return api.ProjectPolicy{}, fmt.Errorf("set idle policy of %s: %w", p.ID, err)
		}
	} else {
		// The update only when the period changes keeps updated_at, the
		// start of the idle clock, where it was on a repeated set.
		if _, err := q.Exec(ctx, `INSERT INTO idle_project_policies (project_id, idle_release_after_s, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (project_id) DO UPDATE SET idle_release_after_s = EXCLUDED.idle_release_after_s, updated_at = EXCLUDED.updated_at
			WHERE idle_project_policies.idle_release_after_s <> EXCLUDED.idle_release_after_s`,
			p.ID, seconds, now); err != nil {
			return api.ProjectPolicy{}, fmt.Errorf("set idle policy of %s: %w", p.ID, err)
		}
		if err := q.QueryRow(ctx, `SELECT updated_at FROM idle_project_policies WHERE project_id = $1`, p.ID).Scan(&pol.UpdatedAt); err != nil {
			return api.ProjectPolicy{}, fmt.Errorf("read idle policy of %s: %w", p.ID, err)
		}
		pol.UpdatedAt = pol.UpdatedAt.UTC()
	}
	affected, err := s.affected(ctx, q, p.ID, now)
	if err != nil {
		return api.ProjectPolicy{}, err
	}
	pol.Affected = affected
	return pol, nil
}

// affected lists the running allocations of project projectID whose idle
// period is the project's (none of their own), with when each would be
// warned and released if nobody used it, as of now.
func (s Settings) affected(ctx context.Context, q store.Querier, projectID string, now time.Time) ([]api.PolicyAffected, error) {
	active, err := alloc.ActiveUnder(ctx, q, []string{projectID}, nil)
	if err != nil {
		return nil, err
	}
	out := []api.PolicyAffected{}
	for _, a := range active {
		st, err := loadState(ctx, q, a.ID, projectID)
		if err != nil {
			return nil, err
		}
		period, from := st.period()
		if from != "project" {
			continue
		}
		release := st.idleSince(a.ActiveAt).Add(period).UTC()
		warn := release.Add(-s.warnAhead(period))
		if warn.Before(now) {
			warn = now
		}
		out = append(out, api.PolicyAffected{AllocationID: a.ID, WarnAt: warn, ReleaseAt: release})
	}
	return out, nil
}
