package app

import (
	"context"
	"maps"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/appspec"
)

// manifestRequest reads the app manifest at path (internal/appspec:
// strict, every refusal names the field) into what `app run` sends:
// image, name, command (command then args), environment, GPU count (0:
// none), shared-memory size, readiness probe and mounts (volumes attached
// to the allocation: docs/apps.md, "Volumes in a container"). Fields a
// workload does not honour yet (args without a command) are refused,
// naming them, rather than ignored; ports are where the app listens on
// the allocation's loopback (host networking) and need nothing more.
// Nothing is sent on a refusal.
func manifestRequest(path string) (api.AppRunRequest, appspec.App, error) {
	app, err := appspec.ParseFile(path)
	if err != nil {
		return api.AppRunRequest{}, app, err
	}
	notYet := func(field, what string) error {
		return api.Errorf(api.CodeInvalidArgument, "app manifest %s: %s: %s is not supported by `app run` yet", path, field, what).
			WithHint("leave it out; see docs/apps.md, \"Manifests\"")
	}
	if len(app.Args) > 0 && len(app.Command) == 0 {
		return api.AppRunRequest{}, app, notYet("args", "args without a command (the image's entrypoint with other arguments)")
	}
	req := api.AppRunRequest{Image: app.Image, Name: app.Name, Env: maps.Clone(app.Env), ShmBytes: app.ShmBytes,
		Readiness: manifestProbe(app.Readiness), NoGPUs: app.GPUs == 0}
	for _, m := range app.Mounts { // volumes attached to the allocation, checked by controld
		req.Mounts = append(req.Mounts, api.AppMount{Volume: m.Volume, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	if app.GPUs != appspec.GPUsAll { // a count: the allocation's first N (controld checks it)
		req.GPUs = app.GPUs
	}
	if len(app.Command) > 0 {
		req.Command = append(append([]string{}, app.Command...), app.Args...)
	}
	return req, app, nil
}

// catalogImage is the catalog image a manifest's REPOSITORY@sha256:…
// names: the one with that reference, else one with that digest (only
// catalog images run: their trust and lifecycle are checked). A
// reference the catalog does not have is refused.
func catalogImage(ctx context.Context, client *api.Client, ref string) (string, error) {
	list, err := client.ImageList(ctx, api.ImageListRequest{})
	if err != nil {
		return "", err
	}
	_, digest, _ := strings.Cut(ref, "@")
	byDigest := ""
	for _, img := range list.Images {
		if img.Ref == ref || strings.HasSuffix(img.Ref, "/"+ref) {
			return img.ID, nil
		}
		if byDigest == "" && img.Digest == digest {
			byDigest = img.ID
		}
	}
	if byDigest != "" {
		return byDigest, nil
	}
	return "", api.Errorf(api.CodeInvalidArgument, "image: %s is not in the catalog (only catalog images run)", ref).
		WithHint("publish it first: `gpuaas image publish NAME --ref " + ref + "`, or name a catalog image (`gpuaas image list`)")
}

// rentVolumes are the volumes an allocation rented for a manifest (`app
// run -f --sku`) is created with: each of its mounts' volumes, at its
// default path (/data/NAME), so that the container can bind it.
func rentVolumes(mounts []api.AppMount) []api.VolumeMount {
	var out []api.VolumeMount
	for _, m := range mounts {
		out = append(out, api.VolumeMount{Volume: m.Volume})
	}
	return out
}
