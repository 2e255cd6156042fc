package ca

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// gateway_keys are the SSH gateways' long-lived keys that an admin
// registered: the only keys the internal CA certifies as gateways
// (sshcert.SignGateway). Registration is a separate, admin-only step so
// that what a gateway's service token can do (gate.authorize, mint
// tickets) is not enough to open a shell on a node: that also takes the
// private half of a registered key.

// validGatewayName is a gateway's name: what sshgate logs and hostd sees
// in the certificate.
func validGatewayName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

const gatewayKeyColumns = `SELECT id, name, public_key, created_by, created_at, revoked_at FROM gateway_keys`

func scanGatewayKey(r pgx.CollectableRow) (api.GatewayKey, error) {
	var k api.GatewayKey
	return k, r.Scan(&k.ID, &k.Name, &k.PublicKey, &k.CreatedBy, &k.CreatedAt, &k.RevokedAt)
}

// AddGatewayKey registers line (authorized_keys format) as the key of the
// gateway name. A name has at most one key in use: revoke the old one to
// replace it. A key registered before (even revoked) is refused, so a
// revocation cannot be undone by registering the same key again.
func AddGatewayKey(ctx context.Context, tx pgx.Tx, name, line, actor string, now time.Time) (api.GatewayKey, error) {
	if !validGatewayName(name) {
		return api.GatewayKey{}, api.Errorf(api.CodeInvalidArgument, "%q is not a valid gateway name", name).
			WithHint("use 1–63 letters, digits, dots, dashes and underscores")
	}
	pub, err := ParseSubjectKey(line)
	if err != nil {
		return api.GatewayKey{}, err
	}
	k := api.GatewayKey{ID: ssh.FingerprintSHA256(pub), Name: name, PublicKey: marshalPublic(pub),
		CreatedBy: actor, CreatedAt: now.UTC().Truncate(time.Microsecond)} // as Postgres stores it
	tag, err := tx.Exec(ctx, `INSERT INTO gateway_keys (id, name, public_key, created_by, created_at)
		VALUES ($1,$2,$3,$4,$5) ON CONFLICT DO NOTHING`, k.ID, k.Name, k.PublicKey, k.CreatedBy, k.CreatedAt)
	if err != nil {
		return api.GatewayKey{}, fmt.Errorf("add gateway key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return api.GatewayKey{}, api.Errorf(api.CodeConflict, "key %s or gateway %q is already registered", k.ID, name).
			WithHint("see `gpuaas ops gateway-key list --revoked`; revoke the old key first to replace it")
	}
	return k, nil
}

// RevokeGatewayKey stops certifying the key named by ref (its fingerprint
// or its gateway's name).
func RevokeGatewayKey(ctx context.Context, tx pgx.Tx, ref string, now time.Time) (api.GatewayKey, error) {
	ref = strings.TrimSpace(ref)
	rows, err := tx.Query(ctx, gatewayKeyColumns+` WHERE (id = $1 OR id = $2 OR name = $1) AND revoked_at IS NULL FOR UPDATE`,
		ref, NormalizeID(ref))
	if err != nil {
		return api.GatewayKey{}, fmt.Errorf("revoke gateway key: %w", err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanGatewayKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.GatewayKey{}, api.Errorf(api.CodeNotFound, "no gateway key %q in use", ref).
			WithHint("see `gpuaas ops gateway-key list`")
	}
	if err != nil {
		return api.GatewayKey{}, fmt.Errorf("revoke gateway key: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE gateway_keys SET revoked_at = $2 WHERE id = $1`, k.ID, now); err != nil {
		return api.GatewayKey{}, fmt.Errorf("revoke gateway key: %w", err)
	}
	k.RevokedAt = &now
	return k, nil
}

// ListGatewayKeys lists gateway keys, newest first.
func ListGatewayKeys(ctx context.Context, q store.Querier, revoked bool) ([]api.GatewayKey, error) {
	where := ` WHERE revoked_at IS NULL`
	if revoked {
		where = ``
	}
	rows, err := q.Query(ctx, gatewayKeyColumns+where+` ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("list gateway keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanGatewayKey)
	if err != nil {
		return nil, fmt.Errorf("list gateway keys: %w", err)
	}
	return out, nil
}

// RegisteredGatewayKey returns the registration of pub, which must be in
// use (registered and not revoked).
func RegisteredGatewayKey(ctx context.Context, q store.Querier, pub ssh.PublicKey) (api.GatewayKey, error) {
	id := ssh.FingerprintSHA256(pub)
	rows, err := q.Query(ctx, gatewayKeyColumns+` WHERE id = $1`, id)
	if err != nil {
		return api.GatewayKey{}, fmt.Errorf("gateway key: %w", err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanGatewayKey)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return api.GatewayKey{}, api.Errorf(api.CodeForbidden, "gateway key %s is not registered", id).
			WithHint("an admin registers it: `gpuaas ops gateway-key add NAME '" + marshalPublic(pub) + "'`")
	case err != nil:
		return api.GatewayKey{}, fmt.Errorf("gateway key: %w", err)
	case k.RevokedAt != nil:
		return api.GatewayKey{}, api.Errorf(api.CodeForbidden, "gateway key %s (%s) was revoked at %s", id, k.Name,
			k.RevokedAt.UTC().Format(time.RFC3339))
	case k.PublicKey != marshalPublic(pub):
		return api.GatewayKey{}, api.Errorf(api.CodeForbidden, "gateway key %s does not match its registration", id)
	}
	return k, nil
}
