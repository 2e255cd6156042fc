package apps

import (
	"errors"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestDecide(t *testing.T) {
	operator := Actor{PlatformRole: api.RoleOperator}
	owner := Actor{PlatformRole: api.RoleUser, Access: project.AccessAdmin}
	member := Actor{PlatformRole: api.RoleUser, Access: project.AccessWrite}
	platform := func(lifecycle, trust string) api.App {
		return api.App{Name: "nb", Scope: api.ImageScopePlatform, Lifecycle: lifecycle, Trust: trust, Image: "jupyter"}
	}
	own := func(lifecycle, trust string) api.App {
		a := platform(lifecycle, trust)
		a.Scope, a.ProjectID, a.Project = api.ImageScopeProject, "p-1", "research"
		return a
	}
	tests := []struct {
		name    string
		app     api.App
		action  Action
		who     Actor
		want    string
		wantErr error
	}{
		{name: "operator promotes a platform app of a verified image", app: platform(api.ImagePublished, api.TrustVerified), action: ActPromote, who: operator, want: api.ImagePromoted},
		{name: "promote needs a verified image", app: platform(api.ImagePublished, api.TrustUnverified), action: ActPromote, who: operator, wantErr: api.ErrConflict},
		{name: "promote of a revoked image's app", app: platform(api.ImagePublished, api.TrustRevoked), action: ActPromote, who: operator, wantErr: api.ErrConflict},
		{name: "promote twice", app: platform(api.ImagePromoted, api.TrustVerified), action: ActPromote, who: operator, wantErr: api.ErrConflict},
		{name: "promote a retired app", app: platform(api.ImageRetired, api.TrustVerified), action: ActPromote, who: operator, wantErr: api.ErrConflict},
		{name: "owner publishes for the platform", app: platform("", ""), action: ActPublish, who: owner, wantErr: api.ErrForbidden},
		{name: "owner promotes the project's app", app: own(api.ImagePublished, api.TrustVerified), action: ActPromote, who: owner, want: api.ImagePromoted},
		{name: "member promotes the project's app", app: own(api.ImagePublished, api.TrustVerified), action: ActPromote, who: member, wantErr: api.ErrForbidden},
		{name: "member publishes", app: own("", ""), action: ActPublish, who: member, wantErr: api.ErrForbidden},
		{name: "deprecate a promoted app", app: own(api.ImagePromoted, api.TrustRevoked), action: ActDeprecate, who: owner, want: api.ImageDeprecated},
		{name: "deprecate twice", app: own(api.ImageDeprecated, api.TrustVerified), action: ActDeprecate, who: owner, wantErr: api.ErrConflict},
		{name: "retire a deprecated app", app: own(api.ImageDeprecated, api.TrustVerified), action: ActRetire, who: owner, want: api.ImageRetired},
		{name: "retire twice", app: own(api.ImageRetired, api.TrustVerified), action: ActRetire, who: owner, wantErr: api.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decide(tt.app, tt.action, tt.who)
			if got != tt.want || (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("got %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMergeFillsWhatTheRequestLeavesUnset(t *testing.T) {
	app := api.App{Name: "nb", ImageID: "img-1", Lifecycle: api.ImagePromoted, Manifest: api.AppManifest{
		Command: []string{"/bin/nb"}, Args: []string{"--port", "8888"}, Env: map[string]string{"A": "app", "B": "app"},
		GPUs: 2, ShmBytes: 1 << 30, Readiness: &api.WorkloadProbe{Port: 8888, HTTPPath: "/"}}}
	req := api.AppRunRequest{Image: "nb", Env: map[string]string{"B": "cli"}}
	if err := Merge(&req, app); err != nil {
		t.Fatal(err)
	}
	if req.Image != "img-1" || req.Name != "nb" || !slices.Equal(req.Command, []string{"/bin/nb", "--port", "8888"}) ||
		req.Env["A"] != "app" || req.Env["B"] != "cli" || req.GPUs != 2 || req.NoGPUs || req.ShmBytes != 1<<30 || req.Readiness.Port != 8888 {
		t.Errorf("merged: %+v", req)
	}
	req = api.AppRunRequest{Image: "nb", Name: "mine", Command: []string{"/bin/sh"}, NoGPUs: true}
	if err := Merge(&req, app); err != nil || req.Name != "mine" || !slices.Equal(req.Command, []string{"/bin/sh"}) || req.GPUs != 0 || !req.NoGPUs {
		t.Errorf("the request's fields win: %+v, %v", req, err)
	}
	none := app
	none.Manifest.GPUs = 0
	req = api.AppRunRequest{Image: "nb"}
	if err := Merge(&req, none); err != nil || !req.NoGPUs {
		t.Errorf("gpus: 0 in the manifest: %+v, %v; want no GPUs", req, err)
	}
	all := app
	all.Manifest.GPUs = api.AppGPUsAll
	req = api.AppRunRequest{Image: "nb"}
	if err := Merge(&req, all); err != nil || req.NoGPUs || req.GPUs != 0 {
		t.Errorf("every GPU: %+v, %v; want gpus 0 (all)", req, err)
	}
	deprecated := app
	deprecated.Lifecycle = api.ImageDeprecated
	if err := Merge(&api.AppRunRequest{Image: "nb"}, deprecated); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("a deprecated app: %v; want invalid_argument", err)
	}
}
