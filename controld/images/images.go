// Package images owns the image catalog (docs/images.md): OCI images pinned
// by digest, with a lifecycle (published → promoted → deprecated → retired)
// and a trust state (unverified → verified | failed_verification → revoked)
// that move independently (transitions.go). It owns the images table;
// controld's handlers call it inside their mutations' transactions.
package images

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// idPrefix starts every image id ("img-7k2m9x4q1c").
const idPrefix = "img"

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidateName refuses a name the catalog cannot hold (the table's check,
// said to the user).
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return api.Errorf(api.CodeInvalidArgument, "image name %q: use 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// New is an image to publish: Repository and Digest are the resolved
// reference; ProjectID "" is a platform image.
type New struct {
	Name, ProjectID, Repository, Digest, Source, By string
}

// Publish adds img to the catalog, published and unverified.
func Publish(ctx context.Context, q store.Querier, n New, now time.Time) (api.Image, error) {
	if err := ValidateName(n.Name); err != nil {
		return api.Image{}, err
	}
	id := ids.New(idPrefix)
	_, err := q.Exec(ctx, `INSERT INTO images (id, name, project_id, repository, digest, source, lifecycle, trust,
		published_by, created_at, updated_at) VALUES ($1,$2,NULLIF($3,''),$4,$5,$6,$7,$8,$9,$10,$10)`,
		id, n.Name, n.ProjectID, n.Repository, n.Digest, n.Source, api.ImagePublished, api.TrustUnverified, n.By, now.UTC())
	if store.IsUniqueViolation(err, "") {
		where := "the platform"
		if n.ProjectID != "" {
			where = "this project"
		}
		return api.Image{}, api.Errorf(api.CodeConflict, "an image named %s already exists in %s", n.Name, where).
			WithHint("choose another name, or retire the old image")
	}
	if err != nil {
		return api.Image{}, fmt.Errorf("publish image %s: %w", n.Name, err)
	}
	return byID(ctx, q, id, false)
}

// selectSQL reads images with their project's name.
const selectSQL = `SELECT i.id, i.name, coalesce(i.project_id, ''), coalesce(p.name, ''), i.repository, i.digest,
	i.source, i.lifecycle, i.trust, i.trust_reason, i.platform, i.size_bytes, i.layers, i.verified_at,
	i.published_by, i.created_at, i.updated_at,
	i.verify_requested_at, i.verify_attempts, i.verify_error, i.verify_due_at
	FROM images i LEFT JOIN projects p ON p.id = i.project_id `

func scan(row pgx.CollectableRow) (api.Image, error) {
	var img api.Image
	var repo string
	var requested, due *time.Time
	var v api.ImageVerification
	err := row.Scan(&img.ID, &img.Name, &img.ProjectID, &img.Project, &repo, &img.Digest,
		&img.Source, &img.Lifecycle, &img.Trust, &img.TrustReason, &img.Platform, &img.SizeBytes, &img.Layers,
		&img.VerifiedAt, &img.PublishedBy, &img.CreatedAt, &img.UpdatedAt,
		&requested, &v.Attempts, &v.LastError, &due)
	if requested != nil && due != nil {
		v.RequestedAt, v.NextAttemptAt = *requested, *due
		img.Verification = &v
	}
	img.Ref = repo + "@" + img.Digest
	img.Scope = api.ImageScopePlatform
	if img.ProjectID != "" {
		img.Scope = api.ImageScopeProject
	}
	return img, err
}

func byID(ctx context.Context, q store.Querier, id string, lock bool) (api.Image, error) {
	sql := selectSQL + `WHERE i.id = $1`
	if lock {
		sql += ` FOR UPDATE OF i`
	}
	rows, err := q.Query(ctx, sql, id)
	if err != nil {
		return api.Image{}, fmt.Errorf("read image %s: %w", id, err)
	}
	img, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Image{}, notFound(id)
	}
	if err != nil {
		return api.Image{}, fmt.Errorf("read image %s: %w", id, err)
	}
	return img, nil
}

func notFound(ref string) error { return Images.NotFound(ref) }

// Find returns the image ref names, by id, or by name: projectID's own
// image of that name first, then the platform's. lock takes the row for
// the rest of the transaction (a change follows).
func Find(ctx context.Context, q store.Querier, ref, projectID string, lock bool) (api.Image, error) {
	found, err := Images.IDs(ctx, q, ref, Where{ProjectID: projectID, Platform: true})
	if err != nil {
		return api.Image{}, err
	}
	return byID(ctx, q, found[0], lock)
}

// List returns the images a caller sees: with all, every image;
// otherwise the platform's promoted and verified ones and projectID's own
// ("" for none), platform images first, by name.
func List(ctx context.Context, q store.Querier, projectID string, all bool) ([]api.Image, error) {
	where := `WHERE (i.project_id IS NULL AND i.lifecycle = 'promoted' AND i.trust = 'verified') OR i.project_id = $1`
	if all {
		where = `WHERE $1::text IS NOT NULL` // every row; $1 stays a parameter
	}
	rows, err := q.Query(ctx, selectSQL+where+` ORDER BY i.project_id NULLS FIRST, i.name`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	return out, nil
}

// Apply records a move (Decide's) of the image id; reason, when not
// empty, replaces the trust's reason.
func Apply(ctx context.Context, q store.Querier, id string, m Move, reason string, now time.Time) (api.Image, error) {
	_, err := q.Exec(ctx, `UPDATE images SET lifecycle = $2, trust = $3,
		trust_reason = CASE WHEN $4 = '' THEN trust_reason ELSE $4 END, updated_at = $5 WHERE id = $1`,
		id, m.Lifecycle, m.Trust, reason, now.UTC())
	if err != nil {
		return api.Image{}, fmt.Errorf("change image %s: %w", id, err)
	}
	return byID(ctx, q, id, false)
}

// Check is the outcome of a verification (internal/registry's): what was
// found, and why it failed ("" when it passed).
type Check struct {
	OK        bool
	Reason    string
	Platform  string
	SizeBytes int64
	Layers    int
	// ConfigDigest is its config's digest, kept in images.config_digest
	// (SameBytes).
	ConfigDigest string
}

// RecordCheck records a verification of the image id: its trust becomes
// verified or failed_verification with the reason, its lifecycle stays,
// and the pending request (if any) is done.
func RecordCheck(ctx context.Context, q store.Querier, id string, c Check, now time.Time) (api.Image, error) {
	_, err := q.Exec(ctx, clearVerifySQL+`, trust = $2, trust_reason = $3, platform = $4, size_bytes = $5,
		layers = $6, verified_at = $7, updated_at = $7, config_digest = $8 WHERE id = $1`,
		id, Verified(c.OK), c.Reason, c.Platform, c.SizeBytes, c.Layers, now.UTC(), c.ConfigDigest)
	if err != nil {
		return api.Image{}, fmt.Errorf("record check of image %s: %w", id, err)
	}
	return byID(ctx, q, id, false)
}

// Trusts returns the trust of each image of ids that exists, by id.
func Trusts(ctx context.Context, q store.Querier, ids []string) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT id, trust FROM images WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("trust of images: %w", err)
	}
	out := make(map[string]string, len(ids))
	var id, trust string
	if _, err := pgx.ForEachRow(rows, []any{&id, &trust}, func() error {
		out[id] = trust
		return nil
	}); err != nil {
		return nil, fmt.Errorf("trust of images: %w", err)
	}
	return out, nil
}
