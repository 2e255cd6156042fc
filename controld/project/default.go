package project

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// A user's default project is the project requests that name none act
// in: chosen with `gpuaas project use`, and otherwise the first project
// the user creates or is added to (Create, SetMember). It lives in
// default_projects, so it is the same on every machine and over SSH.

// SetDefault makes projectID userID's default project.
func SetDefault(ctx context.Context, q store.Querier, userID, projectID string, now time.Time) error {
	_, err := q.Exec(ctx, `INSERT INTO default_projects (user_id, project_id, set_at) VALUES ($1,$2,$3)
		ON CONFLICT (user_id) DO UPDATE SET project_id = EXCLUDED.project_id, set_at = EXCLUDED.set_at`,
		userID, projectID, now.UTC())
	if err != nil {
		return fmt.Errorf("set default project: %w", err)
	}
	return nil
}

// setDefaultIfNone makes projectID userID's default project unless the
// user has one.
func setDefaultIfNone(ctx context.Context, q store.Querier, userID, projectID string, now time.Time) error {
	_, err := q.Exec(ctx, `INSERT INTO default_projects (user_id, project_id, set_at) VALUES ($1,$2,$3)
		ON CONFLICT (user_id) DO NOTHING`, userID, projectID, now.UTC())
	if err != nil {
		return fmt.Errorf("set default project: %w", err)
	}
	return nil
}

// DefaultOf returns userID's default project with the user's role in it
// ("" when they no longer belong to it); ok is false when the user has
// none.
func DefaultOf(ctx context.Context, q store.Querier, userID string) (p api.Project, ok bool, err error) {
	var role *string
	err = q.QueryRow(ctx, `SELECT p.id, p.name, p.created_at, m.role FROM default_projects d
		JOIN projects p ON p.id = d.project_id
		LEFT JOIN project_members m ON m.project_id = d.project_id AND m.user_id = d.user_id
		WHERE d.user_id = $1`, userID).Scan(&p.ID, &p.Name, &p.CreatedAt, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Project{}, false, nil
	}
	if err != nil {
		return api.Project{}, false, fmt.Errorf("default project of %s: %w", userID, err)
	}
	if role != nil {
		p.Role = *role
	}
	return p, true, nil
}
