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

// SameBytes returns the ids of the images of digest and of those whose
// config digest (recorded at verify) is that of an image of digest: the
// images of the same bytes however their manifests were pushed or
// indexed (docs/decisions/0059-app-prices.md). Both lookups use an index
// (migration 0046).
func SameBytes(ctx context.Context, q store.Querier, digest string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id FROM images WHERE digest = $1
		UNION SELECT i.id FROM images d JOIN images i ON i.config_digest = d.config_digest
		WHERE d.digest = $1 AND d.config_digest <> '' AND i.config_digest <> ''`, digest)
	if err != nil {
		return nil, fmt.Errorf("images of %s's bytes: %w", digest, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("images of %s's bytes: %w", digest, err)
	}
	return ids, nil
}

// WithDigest returns the images whose digest is digest among where's
// (the project's own, the platform's; every image's with All), platform
// images first: the
// candidates for a reference REPOSITORY@digest. Another project's image
// is not read at all, so a reference to it answers as one to no image.
func WithDigest(ctx context.Context, q store.Querier, digest string, where Where) ([]api.Image, error) {
	rows, err := q.Query(ctx, selectSQL+`WHERE i.digest = $1
		AND ((i.project_id = $2 AND $2 <> '') OR (i.project_id IS NULL AND $3) OR $4)
		ORDER BY i.project_id NULLS FIRST, i.created_at`, digest, where.ProjectID, where.Platform, where.All)
	if err != nil {
		return nil, fmt.Errorf("images of %s: %w", digest, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("images of %s: %w", digest, err)
	}
	return out, nil
}
