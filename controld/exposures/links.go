package exposures

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// CheckLinkPath checks a one-time link's landing path: a path on the
// exposure's own host ("/" when empty), never a URL of another site
// ("//host", "/\\host") nor a control character.
func CheckLinkPath(path string) (string, error) {
	if path == "" {
		return "/", nil
	}
	bad := !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") || strings.HasPrefix(path, "/\\") || len(path) > 2048
	for _, r := range path {
		if r < 0x20 || r == 0x7f {
			bad = true
		}
	}
	if bad {
		return "", api.Errorf(api.CodeInvalidArgument, "path %q is not a path on the exposure's host", path).
			WithHint("give a path that starts with a single /")
	}
	return path, nil
}

func hashCode(code string) []byte {
	h := sha256.Sum256([]byte(code))
	return h[:]
}

// MintLink stores a one-time link into exposure e for a login, valid
// api.LinkTTL, and returns its code (kept hashed).
func MintLink(ctx context.Context, q store.Querier, e api.Exposure, userID, sessionID, path string, now time.Time) (api.ExposeLinkResponse, error) {
	var b [24]byte
	_, _ = rand.Read(b[:])
	code := base64.RawURLEncoding.EncodeToString(b[:])
	now = now.UTC()
	resp := api.ExposeLinkResponse{Code: code, ExpiresAt: now.Add(api.LinkTTL)}
	if _, err := q.Exec(ctx, `DELETE FROM exposure_links WHERE expires_at < $1`, now.Add(-time.Hour)); err != nil {
		return resp, fmt.Errorf("prune links: %w", err)
	}
	if _, err := q.Exec(ctx, `INSERT INTO exposure_links (code_hash, exposure_id, user_id, session_id, path,
		created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`, hashCode(code), e.ID, userID, sessionID, path,
		now, resp.ExpiresAt); err != nil {
		return resp, fmt.Errorf("mint link: %w", err)
	}
	return resp, nil
}

// RedeemLink uses a link's code once, on the exposure it was minted for
// (allocation and port), before it expires; a code that is unknown, used,
// expired or for another exposure is refused alike.
func RedeemLink(ctx context.Context, q store.Querier, allocationID string, port int, code string, now time.Time) (gateproto.GateRedeemLinkResponse, error) {
	var r gateproto.GateRedeemLinkResponse
	err := q.QueryRow(ctx, `UPDATE exposure_links l SET used_at = $4
		FROM exposures e WHERE l.code_hash = $1 AND l.used_at IS NULL AND l.expires_at > $4
		AND e.id = l.exposure_id AND e.allocation_id = $2 AND e.port = $3
		RETURNING l.user_id, l.session_id, l.path`, hashCode(code), allocationID, port, now.UTC()).
		Scan(&r.UserID, &r.SessionID, &r.Path)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, api.Errorf(api.CodeNotFound, "this link is not valid here, was used or expired").
			WithHint("run `gpuaas open URL` again for a new one")
	}
	if err != nil {
		return r, fmt.Errorf("redeem link: %w", err)
	}
	return r, nil
}
