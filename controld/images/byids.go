package images

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ByIDs returns the images of ids that exist, by id: what a published app
// (controld/apps) shows of its image, its trust included, read when the
// app is read.
func ByIDs(ctx context.Context, q store.Querier, ids []string) (map[string]api.Image, error) {
	rows, err := q.Query(ctx, selectSQL+`WHERE i.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read images: %w", err)
	}
	list, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("read images: %w", err)
	}
	out := make(map[string]api.Image, len(list))
	for _, img := range list {
		out[img.ID] = img
	}
	return out, nil
}

// WithDigest returns every image whose digest is digest, platform images
// first: the candidates for a reference REPOSITORY@digest.
func WithDigest(ctx context.Context, q store.Querier, digest string) ([]api.Image, error) {
	rows, err := q.Query(ctx, selectSQL+`WHERE i.digest = $1 ORDER BY i.project_id NULLS FIRST, i.created_at`, digest)
	if err != nil {
		return nil, fmt.Errorf("images of %s: %w", digest, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("images of %s: %w", digest, err)
	}
	return out, nil
}
