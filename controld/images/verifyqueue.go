package images

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// VerifyChannel is the Postgres notification channel a verification
// request is announced on when its transaction commits; the verifiers
// LISTEN to it (Verifier.Run).
const VerifyChannel = "image_verify"

// RequestVerify queues a verification of the image id, asked for by
// userID, due at once (the verifiers are notified when tx commits). An
// image with a verification pending keeps it: asking again changes
// nothing, and the answer says so (Image.Verification).
func RequestVerify(ctx context.Context, q store.Querier, id, userID string, now time.Time) (api.Image, error) {
	_, err := q.Exec(ctx, `WITH r AS (
			UPDATE images SET verify_requested_at = $3, verify_requested_by = $2, verify_due_at = $3,
				verify_attempts = 0, verify_error = '', updated_at = $3
			WHERE id = $1 AND verify_requested_at IS NULL RETURNING id)
		SELECT pg_notify('`+VerifyChannel+`', id) FROM r`, id, userID, now.UTC())
	if err != nil {
		return api.Image{}, fmt.Errorf("queue verification of image %s: %w", id, err)
	}
	return byID(ctx, q, id, false)
}

// Claim is a verification a verifier took: the image, where to fetch it,
// and who asked.
type Claim struct {
	ImageID     string
	Ref         string
	RequestedBy string
	RequestedAt time.Time
	Attempt     int
}

// ClaimVerify takes the verification due longest, if any is due at now,
// holding it until leaseUntil: another verifier takes it again only after
// that (this one died or hung). ok is false when none is due.
func ClaimVerify(ctx context.Context, q store.Querier, now, leaseUntil time.Time) (c Claim, ok bool, err error) {
	var repo, digest string
	err = q.QueryRow(ctx, `UPDATE images SET verify_due_at = $2, verify_attempts = verify_attempts + 1
		WHERE id = (SELECT id FROM images WHERE verify_requested_at IS NOT NULL AND verify_due_at <= $1
			ORDER BY verify_due_at LIMIT 1 FOR UPDATE SKIP LOCKED)
			AND verify_requested_at IS NOT NULL AND verify_due_at <= $1
		RETURNING id, repository, digest, verify_requested_by, verify_requested_at, verify_attempts`,
		now.UTC(), leaseUntil.UTC()).Scan(&c.ImageID, &repo, &digest, &c.RequestedBy, &c.RequestedAt, &c.Attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Claim{}, false, nil
	}
	if err != nil {
		return Claim{}, false, fmt.Errorf("claim a verification: %w", err)
	}
	c.Ref = repo + "@" + digest
	return c, true, nil
}

// NextVerifyDue is when the earliest pending verification falls due (or
// its claim's lease ends); ok is false when none is pending.
func NextVerifyDue(ctx context.Context, q store.Querier) (due time.Time, ok bool, err error) {
	var t *time.Time
	if err := q.QueryRow(ctx, `SELECT min(verify_due_at) FROM images WHERE verify_requested_at IS NOT NULL`).Scan(&t); err != nil {
		return time.Time{}, false, fmt.Errorf("next verification: %w", err)
	}
	if t == nil {
		return time.Time{}, false, nil
	}
	return *t, true, nil
}

// DeferVerify puts the claimed verification c back, due at due, keeping
// why the attempt could not run (the registry's error) for people to see.
// It changes nothing when the request is no longer c's (recorded, or
// dropped and asked again meanwhile).
func DeferVerify(ctx context.Context, q store.Querier, c Claim, reason string, due time.Time) error {
	_, err := q.Exec(ctx, `UPDATE images SET verify_due_at = $3, verify_error = $4
		WHERE id = $1 AND verify_requested_at = $2`, c.ImageID, c.RequestedAt, due.UTC(), reason)
	if err != nil {
		return fmt.Errorf("defer verification of image %s: %w", c.ImageID, err)
	}
	return nil
}

// LockPending returns the image of the claimed verification c, locked, or
// ok false when c's request is no longer pending (another verifier
// recorded it after c's lease ended).
func LockPending(ctx context.Context, tx pgx.Tx, c Claim) (img api.Image, ok bool, err error) {
	img, err = byID(ctx, tx, c.ImageID, true)
	if err != nil {
		return api.Image{}, false, err
	}
	if img.Verification == nil || !img.Verification.RequestedAt.Equal(c.RequestedAt) {
		return img, false, nil
	}
	return img, true, nil
}

// DropVerify ends the pending verification of the image id without a
// result (the image was revoked or retired while it waited).
func DropVerify(ctx context.Context, q store.Querier, id string, now time.Time) (api.Image, error) {
	if _, err := q.Exec(ctx, clearVerifySQL+`, updated_at = $2 WHERE id = $1`, id, now.UTC()); err != nil {
		return api.Image{}, fmt.Errorf("drop verification of image %s: %w", id, err)
	}
	return byID(ctx, q, id, false)
}

// clearVerifySQL ends a pending verification (RecordCheck, DropVerify).
const clearVerifySQL = `UPDATE images SET verify_requested_at = NULL, verify_requested_by = NULL,
	verify_due_at = NULL, verify_attempts = 0, verify_error = ''`
