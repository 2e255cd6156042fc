package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Check is what a verification found. Reason says why it failed ("" when
// OK); the rest is what was read before (Platform, Size: manifest, config
// and layers, in bytes, as their descriptors say and their bytes agree).
type Check struct {
	OK        bool
	Reason    string
	Platform  string
	SizeBytes int64
	Layers    int
	// ConfigDigest is the digest of the image's config (of the
	// linux/amd64 manifest of an index): the same for every manifest of
	// the same image, whatever its manifest digest (an app's price
	// follows it, docs/decisions/0059-app-prices.md).
	ConfigDigest string
}

// Verify fetches the image ref (REPOSITORY@sha256:…) by digest — its
// manifest (the linux/amd64 one of an index), its config and every layer —
// and checks each against its descriptor: digest and size, and the
// config's platform. A registry that cannot be reached is an error (the
// check did not happen); anything wrong with the image is a failed Check
// with its reason.
func (c *Client) Verify(ctx context.Context, ref string) (Check, error) {
	r, err := c.Parse(ref)
	if err != nil {
		return Check{}, err
	}
	d, ok := r.(name.Digest)
	if !ok {
		return Check{}, api.Errorf(api.CodeInvalidArgument, "ref %q is not pinned by digest", ref)
	}
	opts := c.options(ctx)
	// Get checks the manifest's bytes against the digest asked for.
	desc, err := remote.Get(d, opts...)
	if err != nil {
		if isUnreachable(err) {
			return Check{}, fmt.Errorf("verify %s: %w", ref, err)
		}
		return failed(Check{}, "manifest: %v", err), nil
	}
	var chk Check
	chk.SizeBytes = desc.Size
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return failed(chk, "index: %v", err), nil
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return failed(chk, "index: %v", err), nil
		}
		var found *v1.Descriptor
		for i, m := range im.Manifests {
			if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == "amd64" {
				found = &im.Manifests[i]
				break
			}
		}
		if found == nil {
			return failed(chk, "the index has no %s manifest", api.ImagePlatform), nil
		}
		if desc, err = remote.Get(d.Context().Digest(found.Digest.String()), opts...); err != nil {
			return failed(chk, "manifest %s: %v", found.Digest, err), nil
		}
		chk.SizeBytes += desc.Size
	}
	if !desc.MediaType.IsImage() {
		return failed(chk, "%s is not an image manifest", desc.MediaType), nil
	}
	img, err := desc.Image()
	if err != nil {
		return failed(chk, "manifest: %v", err), nil
	}
	return c.checkImage(ctx, d.Context(), img, chk)
}

func (c *Client) checkImage(ctx context.Context, repo name.Repository, img v1.Image, chk Check) (Check, error) {
	m, err := img.Manifest()
	if err != nil {
		return failed(chk, "manifest: %v", err), nil
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return failed(chk, "config %s: %v", m.Config.Digest, err), nil
	}
	if why := mismatch(raw, int64(len(raw)), m.Config); why != "" {
		return failed(chk, "config: %s", why), nil
	}
	chk.SizeBytes += m.Config.Size
	chk.ConfigDigest = m.Config.Digest.String()
	cf, err := img.ConfigFile()
	if err != nil {
		return failed(chk, "config: %v", err), nil
	}
	chk.Platform = cf.OS + "/" + cf.Architecture
	if chk.Platform != api.ImagePlatform {
		return failed(chk, "platform %s, not %s", chk.Platform, api.ImagePlatform), nil
	}
	if len(m.Layers) != len(cf.RootFS.DiffIDs) {
		return failed(chk, "%d layers in the manifest, %d in the config", len(m.Layers), len(cf.RootFS.DiffIDs)), nil
	}
	for i, l := range m.Layers {
		if why := c.checkLayer(ctx, repo, l); why != "" {
			return failed(chk, "layer %d (%s): %s", i+1, l.Digest, why), nil
		}
		chk.SizeBytes += l.Size
		chk.Layers++
	}
	chk.OK = true
	return chk, nil
}

// checkLayer reads a layer's blob by digest and says how it differs from
// its descriptor ("" when it does not).
func (c *Client) checkLayer(ctx context.Context, repo name.Repository, want v1.Descriptor) string {
	l, err := remote.Layer(repo.Digest(want.Digest.String()), c.options(ctx)...)
	if err != nil {
		return err.Error()
	}
	rc, err := l.Compressed()
	if err != nil {
		return "fetch: " + err.Error()
	}
	defer rc.Close()
	h := sha256.New()
	n, readErr := io.Copy(h, rc)
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	switch {
	case n != want.Size:
		return fmt.Sprintf("size mismatch: %d bytes, the manifest says %d", n, want.Size)
	case got != want.Digest.String():
		return "digest mismatch: the blob's is " + got
	case readErr != nil: // the library's own checks, had ours passed
		return "fetch: " + readErr.Error()
	}
	return ""
}

// mismatch says how data differs from its descriptor ("" when it does
// not).
func mismatch(data []byte, n int64, want v1.Descriptor) string {
	sum := sha256.Sum256(data)
	got := "sha256:" + hex.EncodeToString(sum[:])
	switch {
	case n != want.Size:
		return fmt.Sprintf("size mismatch: %d bytes, the manifest says %d", n, want.Size)
	case got != want.Digest.String():
		return "digest mismatch: its bytes hash to " + got
	}
	return ""
}

func failed(c Check, format string, args ...any) Check {
	c.OK = false
	c.Reason = fmt.Sprintf(format, args...)
	return c
}
