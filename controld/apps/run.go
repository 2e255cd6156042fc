package apps

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// ForRun returns the published app `app run NAME` names on an allocation
// of projectID: the project's own promoted app of that name, else the
// platform's. Only a promoted app takes a name from an image of it: one
// being staged (published), deprecated or retired does not, nor can a
// platform app the renter cannot see stand in their way. ok is false when
// there is none: NAME is then an image. An app named by its id is
// returned whatever its state (Merge refuses one not promoted).
func ForRun(ctx context.Context, q store.Querier, name, projectID string) (api.App, bool, error) {
	if ids.Valid(idPrefix, name) {
		app, err := byID(ctx, q, name, false)
		if errors.Is(err, api.ErrNotFound) || (err == nil && app.ProjectID != "" && app.ProjectID != projectID) {
			// An app's id names that app only, never an image that
			// happens to be called so; another project's is none.
			return api.App{}, false, api.Errorf(api.CodeNotFound, "no app %s", name).WithHint("see `gpuaas app list`")
		}
		return app, err == nil, err
	}
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM apps WHERE name = $1 AND lifecycle = 'promoted'
		AND (project_id = $2 OR project_id IS NULL) ORDER BY project_id NULLS LAST LIMIT 1`, name, projectID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.App{}, false, nil
	}
	if err != nil {
		return api.App{}, false, fmt.Errorf("find app %s: %w", name, err)
	}
	app, err := byID(ctx, q, id, false)
	return app, err == nil, err
}

// Merge makes req run app: its image (by id, so its digest), and each
// field of its manifest the request leaves unset (the request's command,
// GPUs, shared memory, readiness and name win; its environment is laid
// over the app's). An app that is not promoted is refused; the image's
// own states are checked where every run's are (controld/workloads).
func Merge(req *api.AppRunRequest, app api.App) error {
	if app.Lifecycle != api.ImagePromoted {
		return api.Errorf(api.CodeInvalidArgument, "app %s is %s, not promoted: a workload runs only promoted apps", app.Name, app.Lifecycle).
			WithHint("see `gpuaas app list`")
	}
	m := app.Manifest
	req.Image = app.ImageID
	if req.Name == "" {
		req.Name = app.Name
	}
	if len(req.Command) == 0 && len(m.Command) > 0 {
		req.Command = append(append([]string{}, m.Command...), m.Args...)
	}
	if len(m.Env) > 0 {
		env := maps.Clone(m.Env)
		maps.Copy(env, req.Env)
		req.Env = env
	}
	if req.GPUs == 0 && !req.NoGPUs {
		switch {
		case m.GPUs == 0:
			req.NoGPUs = true
		case m.GPUs > 0:
			req.GPUs = m.GPUs
		}
	}
	if req.ShmBytes == 0 {
		req.ShmBytes = m.ShmBytes
	}
	if req.Readiness == nil && m.Readiness != nil {
		p := *m.Readiness
		req.Readiness = &p
	}
	return nil
}
