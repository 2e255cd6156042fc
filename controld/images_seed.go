package controld

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SeedImage makes ref (REPOSITORY@sha256:…, in the configured registry) the
// platform image name, verified against the registry and promoted, unless
// a platform image of that name exists: then it is left as operators made
// it. `gpuaas dev` seeds its stock image so. A ref that fails verification
// is an error, and nothing is written.
func (s *Server) SeedImage(ctx context.Context, name, ref, by string) (api.Image, error) {
	repo, digest, err := s.registry.Resolve(ctx, ref)
	if err != nil {
		return api.Image{}, fmt.Errorf("seed image %s: %w", name, err)
	}
	chk, err := s.registry.Verify(ctx, repo+"@"+digest)
	if err != nil {
		return api.Image{}, fmt.Errorf("seed image %s: %w", name, err)
	}
	if !chk.OK {
		return api.Image{}, fmt.Errorf("seed image %s: verification failed: %s", name, chk.Reason)
	}
	var out api.Image
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := images.Find(ctx, tx, name, "", true)
		if err == nil {
			out = cur
			return nil
		}
		if !errors.Is(err, api.ErrNotFound) {
			return err
		}
		img, err := images.Publish(ctx, tx, images.New{Name: name, Repository: repo, Digest: digest, By: by}, s.now())
		if err != nil {
			return err
		}
		if _, err := images.RecordCheck(ctx, tx, img.ID, images.Check{OK: true, Platform: chk.Platform,
			SizeBytes: chk.SizeBytes, Layers: chk.Layers, ConfigDigest: chk.ConfigDigest}, s.now()); err != nil {
			return err
		}
		out, err = images.Apply(ctx, tx, img.ID, images.Move{Lifecycle: api.ImagePromoted, Trust: api.TrustVerified}, "", s.now())
		return err
	})
	if err != nil {
		return api.Image{}, fmt.Errorf("seed image %s: %w", name, err)
	}
	return out, nil
}
