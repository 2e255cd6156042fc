package apps

import (
	"context"
	"errors"
	"maps"
	"strings"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/appspec"
)

func invalid(field, format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidArgument, "app manifest: "+field+": "+format, args...)
}

// Manifest is what a published app stores of a parsed manifest. Fields
// a workload does not honour yet (mounts; args without a command) are
// refused naming them, as `app run -f` refuses them.
func Manifest(a appspec.App) (api.AppManifest, error) {
	switch {
	case len(a.Mounts) > 0:
		return api.AppManifest{}, invalid("mounts", "a volume mount is not supported by published apps yet").
			WithHint("leave it out; see docs/apps.md, \"Manifests\"")
	case len(a.Args) > 0 && len(a.Command) == 0:
		return api.AppManifest{}, invalid("args", "args without a command (the image's entrypoint with other arguments) are not supported yet").
			WithHint("give the command too")
	}
	m := api.AppManifest{Command: a.Command, Args: a.Args, Env: maps.Clone(a.Env), GPUs: a.GPUs, ShmBytes: a.ShmBytes}
	if a.GPUs == appspec.GPUsAll {
		m.GPUs = api.AppGPUsAll
	}
	for _, p := range a.Ports {
		m.Ports = append(m.Ports, api.AppPort{Name: p.Name, Port: p.Port, Protocol: p.Protocol})
	}
	if p := a.Readiness; p != nil {
		m.Readiness = &api.WorkloadProbe{Port: p.Port, HTTPPath: p.Path, StartDeadline: p.StartDeadline}
	}
	return m, nil
}

// Image is the catalog image a manifest's image names for an app of
// projectID ("" for the platform's): a catalog name (the project's own
// first, then the platform's), an image id, or REPOSITORY@sha256:… of a
// catalog image. For a project's app, an image that is not in the
// catalog and another project's own are refused alike, naming the field:
// one answer, so that a reference does not tell whether another project
// holds that image. For a platform app (its publisher is an operator,
// who sees every image), a project's image is refused as such. Whether
// the publisher may see the image is the caller's check.
func Image(ctx context.Context, q store.Querier, ref, projectID string) (api.Image, error) {
	var img api.Image
	var err error
	if repo, digest, ok := strings.Cut(ref, "@"); ok {
		img, err = byRef(ctx, q, repo, digest, projectID)
	} else {
		img, err = images.Find(ctx, q, ref, projectID, false)
	}
	switch {
	case errors.Is(err, api.ErrNotFound):
		return api.Image{}, NotInCatalog(ref)
	case err != nil:
		return api.Image{}, err
	case img.ProjectID != "" && projectID == "":
		return api.Image{}, invalid("image", "%s is a project's own image: a platform app runs a platform image", ref)
	case img.ProjectID != "" && img.ProjectID != projectID:
		return api.Image{}, NotInCatalog(ref)
	}
	return img, nil
}

// NotInCatalog is the one answer for a reference to no image the app's
// scope may run, or one the publisher may not see.
func NotInCatalog(ref string) error {
	return invalid("image", "%s is not in the catalog (an app runs a catalog image)", ref).
		WithHint("publish the image first (`gpuaas image publish`), or name one of `gpuaas image list`")
}

// byRef is the catalog image REPOSITORY@digest names: the one with that
// repository (the project's own first, then the platform's), else one of
// that digest. For a project's app only its own and the platform's are
// read; for a platform app every image, for Image to refuse a project's.
func byRef(ctx context.Context, q store.Querier, repo, digest, projectID string) (api.Image, error) {
	list, err := images.WithDigest(ctx, q, digest, images.Where{ProjectID: projectID, Platform: true, All: projectID == ""})
	if err != nil {
		return api.Image{}, err
	}
	rank := func(img api.Image) int {
		r := 0
		if img.Ref == repo+"@"+digest || strings.HasSuffix(img.Ref, "/"+repo+"@"+digest) {
			r += 4
		}
		switch img.ProjectID {
		case projectID:
			r += 2
		case "":
			r++
		}
		return r
	}
	best, found := api.Image{}, false
	for _, img := range list {
		if !found || rank(img) > rank(best) {
			best, found = img, true
		}
	}
	if !found {
		return api.Image{}, api.Errorf(api.CodeNotFound, "no image %s@%s", repo, digest)
	}
	return best, nil
}
