package job

import (
	"context"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// checkImageUsable refuses, before an allocation is rented for the job,
// an image job.create would refuse once the allocation exists
// (controld/jobs/image.go): unknown, revoked, not verified or not
// promoted, naming the field image. job.create checks again, against
// the allocation's project: this check only spares a rental.
func checkImageUsable(ctx context.Context, client *api.Client, ref string) error {
	if ref == "" {
		return nil
	}
	var img *api.Image
	var err error
	if strings.Contains(ref, "@sha256:") {
		img, err = byDigestRef(ctx, client, ref)
	} else {
		img, err = client.ImageGet(ctx, api.ImageRef{Image: ref, RunOrder: true})
	}
	switch api.CodeOf(err) {
	case api.CodeForbidden:
		return nil // left to job.create
	case api.CodeNotFound, api.CodeInvalidArgument:
		return api.Errorf(api.CodeInvalidArgument, "image: no image %q in your project or the platform's catalog", ref).
			WithHint("see `gpuaas image list`")
	}
	if err != nil {
		return err
	}
	return img.RunRefusal("job")
}

// byDigestRef is the image of the caller's catalog whose reference, or
// digest, is ref's.
func byDigestRef(ctx context.Context, client *api.Client, ref string) (*api.Image, error) {
	l, err := client.ImageList(ctx, api.ImageListRequest{})
	if err != nil {
		return nil, err
	}
	_, digest, _ := strings.Cut(ref, "@")
	var found *api.Image
	for i, img := range l.Images {
		if img.Ref == ref {
			return &l.Images[i], nil
		}
		if img.Digest == digest && found == nil {
			found = &l.Images[i]
		}
	}
	if found == nil {
		return nil, api.Errorf(api.CodeNotFound, "no image %s", ref)
	}
	return found, nil
}
