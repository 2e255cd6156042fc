package busauth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

const identityColumns = `SELECT public_key, kind, name, created_by, created_at, revoked_at FROM bus_identities`

func scanIdentity(row pgx.Row) (api.BusIdentity, error) {
	var id api.BusIdentity
	err := row.Scan(&id.PublicKey, &id.Kind, &id.Name, &id.CreatedBy, &id.CreatedAt, &id.RevokedAt)
	return id, err
}

// identityByKey returns the registered identity of key, revoked or not,
// or nil.
func identityByKey(ctx context.Context, q store.Querier, key string) (*api.BusIdentity, error) {
	id, err := scanIdentity(q.QueryRow(ctx, identityColumns+` WHERE public_key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bus identity: %w", err)
	}
	return &id, nil
}

// LiveIdentity returns the live registered identity of key, or a
// not_found error.
func LiveIdentity(ctx context.Context, q store.Querier, key string) (api.BusIdentity, error) {
	id, err := identityByKey(ctx, q, key)
	if err != nil {
		return api.BusIdentity{}, err
	}
	if id == nil || id.RevokedAt != nil {
		return api.BusIdentity{}, api.Errorf(api.CodeNotFound, "no registered key %s", key)
	}
	return *id, nil
}

// ValidateIdentity checks a registration request.
func ValidateIdentity(req api.BusIdentityAddRequest) error {
	if req.Kind != api.BusIdentityGateway && req.Kind != api.BusIdentityOperator {
		return api.Errorf(api.CodeInvalidArgument, "kind must be %s or %s, got %q",
			api.BusIdentityGateway, api.BusIdentityOperator, req.Kind)
	}
	if !validName(req.Name) {
		return api.Errorf(api.CodeInvalidArgument, "%q is not a valid name", req.Name).
			WithHint("use 1–63 lower-case letters, digits and dashes")
	}
	if !api.CanonicalUserKey(req.PublicKey) {
		return api.Errorf(api.CodeInvalidArgument, "%q is not an nkey user public key (U…)", req.PublicKey)
	}
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || i > 0 && r == '-') {
			return false
		}
	}
	return true
}

// AddIdentity registers a key.
func AddIdentity(ctx context.Context, tx pgx.Tx, req api.BusIdentityAddRequest, actor string, now time.Time) (api.BusIdentity, error) {
	if err := ValidateIdentity(req); err != nil {
		return api.BusIdentity{}, err
	}
	id := api.BusIdentity{PublicKey: req.PublicKey, Kind: req.Kind, Name: req.Name, CreatedBy: actor, CreatedAt: now}
	_, err := tx.Exec(ctx, `INSERT INTO bus_identities (public_key, kind, name, created_by, created_at)
		VALUES ($1,$2,$3,$4,$5)`, id.PublicKey, id.Kind, id.Name, id.CreatedBy, id.CreatedAt)
	if store.IsUniqueViolation(err, "bus_identities_pkey") {
		return api.BusIdentity{}, api.Errorf(api.CodeConflict, "key %s is already registered", req.PublicKey)
	}
	if err != nil {
		return api.BusIdentity{}, fmt.Errorf("register key: %w", err)
	}
	return id, nil
}

// ListIdentities lists registered keys, revoked ones too.
func ListIdentities(ctx context.Context, q store.Querier) ([]api.BusIdentity, error) {
	rows, err := q.Query(ctx, identityColumns+` ORDER BY name, created_at`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.BusIdentity, error) { return scanIdentity(r) })
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return out, nil
}

// RevokeIdentities revokes a key, or every live key of a name; the caller
// closes their connections after the commit (ClosePrincipal).
func RevokeIdentities(ctx context.Context, tx pgx.Tx, req api.BusIdentityRevokeRequest, now time.Time) ([]api.BusIdentity, error) {
	if (req.PublicKey == "") == (req.Name == "") {
		return nil, api.Errorf(api.CodeInvalidArgument, "give a public key or a name")
	}
	rows, err := tx.Query(ctx, `UPDATE bus_identities SET revoked_at = $3
		WHERE revoked_at IS NULL AND (public_key = $1 OR name = $2)
		RETURNING public_key, kind, name, created_by, created_at, revoked_at`, req.PublicKey, req.Name, now)
	if err != nil {
		return nil, fmt.Errorf("revoke keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.BusIdentity, error) { return scanIdentity(r) })
	if err != nil {
		return nil, fmt.Errorf("revoke keys: %w", err)
	}
	if len(out) == 0 {
		return nil, api.Errorf(api.CodeNotFound, "no live key matches")
	}
	return out, nil
}

// revokedKeys returns those of keys that are registered and revoked.
func revokedKeys(ctx context.Context, q store.Querier, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT public_key FROM bus_identities WHERE public_key = ANY($1) AND revoked_at IS NOT NULL`, keys)
	if err != nil {
		return nil, fmt.Errorf("revoked keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("revoked keys: %w", err)
	}
	return out, nil
}
