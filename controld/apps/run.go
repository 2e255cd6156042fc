package apps

import (
	"context"
	"errors"
	"maps"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ForRun returns the published app `app run NAME` names on an allocation
// of projectID: the project's own app of that name, else the platform's,
// retired ones left out (a retired app no longer takes its name from an
// image's). ok is false when there is none: NAME is then an image.
func ForRun(ctx context.Context, q store.Querier, name, projectID string) (api.App, bool, error) {
	app, err := Find(ctx, q, name, projectID, false)
	if errors.Is(err, api.ErrNotFound) {
		return api.App{}, false, nil
	}
	if err != nil {
		return api.App{}, false, err
	}
	if app.Lifecycle == api.ImageRetired || (app.ProjectID != "" && app.ProjectID != projectID) {
		return api.App{}, false, nil
	}
	return app, true, nil
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
