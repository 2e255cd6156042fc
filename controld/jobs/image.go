package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
)

// A job.yaml's image (docs/jobs.md "Images",
// docs/decisions/0052-jobs-in-images.md) is resolved when the job is
// created, as `app run` resolves its image: a catalog name or id, or a
// digest reference a catalog image of the allocation's project (or the
// platform's) has. The job keeps the image's digest reference: every
// attempt runs the bytes that were checked.

func badImage(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidArgument, "image: %s", fmt.Sprintf(format, args...))
}

// resolveImage returns the digest reference of the image ref names for a
// job on allocation a, or refuses it naming the field: unknown, another
// project's, revoked, not verified or not promoted, or an allocation whose
// jobs cannot run in a container.
func resolveImage(ctx context.Context, tx pgx.Tx, a api.Allocation, ref string) (api.Image, error) {
	ref = strings.TrimSpace(ref)
	if !api.JobsRunInImages(a.Shape) {
		return api.Image{}, badImage("allocation %s is a %s: a job with an image runs on a bare-metal allocation", a.ID, a.Shape).
			WithHint("drop image: to run in the allocation's own environment, or rent a bare-metal SKU (docs/jobs.md \"Images\")")
	}
	var img api.Image
	var err error
	if strings.Contains(ref, "@sha256:") {
		img, err = byDigestRef(ctx, tx, ref, a.ProjectID)
	} else {
		img, err = images.Find(ctx, tx, ref, a.ProjectID, false)
	}
	if api.CodeOf(err) == api.CodeNotFound || api.CodeOf(err) == api.CodeInvalidArgument {
		return api.Image{}, badImage("no image %q in project %s or the platform's catalog", ref, a.ProjectID).
			WithHint("see `gpuaas image list`")
	}
	if err != nil {
		return api.Image{}, err
	}
	if img.ProjectID != "" && img.ProjectID != a.ProjectID {
		return api.Image{}, badImage("no image %q in project %s or the platform's catalog", ref, a.ProjectID).
			WithHint("see `gpuaas image list`")
	}
	if err := img.RunRefusal("job"); err != nil {
		return api.Image{}, err
	}
	if err := refusePriced(ctx, tx, img, ref); err != nil {
		return api.Image{}, err
	}
	return img, nil
}

// refusePriced refuses an image whose digest is the image of a priced
// platform app (docs/decisions/0059-app-prices.md): a job has no app
// meter, so it would run the app's bytes without its price.
func refusePriced(ctx context.Context, tx pgx.Tx, img api.Image, ref string) error {
	app, ok, err := apps.PricedImage(ctx, tx, img.Digest)
	if err != nil || !ok {
		return err
	}
	return badImage("image %s is the image of app %s, priced %s/h: run it with `gpuaas app run %s`",
		ref, app.Name, api.FormatMoney(app.PricePerHourMinor, billing.DefaultCurrency), app.Name).
		WithHint("a job has no app meter; see docs/apps.md \"Prices\"")
}

// recheckImage refuses, when a queued job (docs/decisions/0034-queued-jobs-start-themselves.md)
// or a retry (docs/decisions/0045-job-retries.md) is about to be given
// its job.start, an image that may no longer run: revoked, failed
// verification or retired since the job was created, or since then the
// image of a priced platform app (refusePriced). The refusal is
// job.create's (api.Image.RunRefusal); a job without an image passes.
// An error that is not an *api.Error is the store's.
func recheckImage(ctx context.Context, tx pgx.Tx, j row) error {
	if j.spec.Image == "" {
		return nil
	}
	img, err := byDigestRef(ctx, tx, j.spec.Image, j.ProjectID)
	if api.CodeOf(err) == api.CodeNotFound {
		return badImage("no image %q in project %s or the platform's catalog", j.spec.ImageName, j.ProjectID).
			WithHint("see `gpuaas image list`")
	}
	if err != nil {
		return err
	}
	if err := img.RunRefusal("job"); err != nil {
		return err
	}
	// An app priced on its image since the job was created: the job
	// would run the app's bytes without its price.
	return refusePriced(ctx, tx, img, j.spec.ImageName)
}

// byDigestRef is the catalog image of project (or the platform) whose
// reference, or digest, is ref's.
func byDigestRef(ctx context.Context, tx pgx.Tx, ref, projectID string) (api.Image, error) {
	_, digest, _ := strings.Cut(ref, "@")
	list, err := images.List(ctx, tx, projectID, true)
	if err != nil {
		return api.Image{}, err
	}
	var found *api.Image
	for i, img := range list {
		if img.ProjectID != "" && img.ProjectID != projectID {
			continue
		}
		if img.Ref == ref {
			return img, nil
		}
		if img.Digest == digest && found == nil {
			found = &list[i]
		}
	}
	if found == nil {
		return api.Image{}, api.Errorf(api.CodeNotFound, "no image %s", ref)
	}
	return *found, nil
}

// imageGPUs are the GPUs a job's container gets: its allocation's, in
// slot order (as an app's); none for a job without an image.
func imageGPUs(ctx context.Context, tx pgx.Tx, sp spec, allocID string) ([]string, error) {
	if sp.Image == "" {
		return nil, nil
	}
	gpus, err := node.GPUsOfAllocation(ctx, tx, allocID)
	if err != nil {
		return nil, fmt.Errorf("allocation %s gpus: %w", allocID, err)
	}
	return gpus, nil
}
