package ca

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// lock serializes changes to one CA's keys across replicas until tx ends,
// so two rotations cannot both demote the same active key.
func lock(ctx context.Context, tx pgx.Tx, name string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('gpuaas.ssh_ca.' || $1, 0))`, name); err != nil {
		return fmt.Errorf("lock %s CA: %w", name, err)
	}
	return nil
}

// Rotate adds a key to the CA. Without stage the new key signs from now on
// and the previous active key stays trusted until it is retired; with
// stage the new key is only trusted, for clients to learn before it signs
// (Activate makes it the signing key).
func (s *Service) Rotate(ctx context.Context, tx pgx.Tx, name string, stage bool) (api.CAKey, error) {
	if err := ValidName(name); err != nil {
		return api.CAKey{}, err
	}
	if err := lock(ctx, tx, name); err != nil {
		return api.CAKey{}, err
	}
	k, err := s.newKey(name)
	if err != nil {
		return api.CAKey{}, err
	}
	now := s.now()
	k.CreatedAt = now
	if !stage {
		if _, err := tx.Exec(ctx, `UPDATE ssh_ca_keys SET active = false WHERE ca = $1 AND active`, name); err != nil {
			return api.CAKey{}, fmt.Errorf("rotate %s CA: %w", name, err)
		}
		k.Active, k.ActivatedAt = true, &now
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ssh_ca_keys (id, ca, public_key, private_key, active, created_at, activated_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7)`, k.ID, name, k.PublicKey, k.pem, k.Active, now, k.ActivatedAt); err != nil {
		return api.CAKey{}, fmt.Errorf("rotate %s CA: %w", name, err)
	}
	s.mu.Lock()
	s.signers[k.ID] = k.priv
	s.mu.Unlock()
	return k.CAKey, nil
}

// Activate makes a trusted key of the CA (a staged one, or one that signed
// before) the signing key. The key that signed until now stays trusted.
func (s *Service) Activate(ctx context.Context, tx pgx.Tx, name, id string) (api.CAKey, error) {
	if err := ValidName(name); err != nil {
		return api.CAKey{}, err
	}
	if err := lock(ctx, tx, name); err != nil {
		return api.CAKey{}, err
	}
	id = NormalizeID(id)
	k, err := get(ctx, tx, name, id)
	if err != nil {
		return api.CAKey{}, err
	}
	switch {
	case k.RetiredAt != nil:
		return api.CAKey{}, api.Errorf(api.CodeConflict, "key %s of the %s CA is retired", id, name).
			WithHint("rotate to add a new key: `gpuaas ops ca rotate --ca " + name + "`")
	case k.Active:
		return k, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE ssh_ca_keys SET active = false WHERE ca = $1 AND active`, name); err != nil {
		return api.CAKey{}, fmt.Errorf("activate %s: %w", id, err)
	}
	now := s.now()
	if _, err := tx.Exec(ctx, `UPDATE ssh_ca_keys SET active = true, activated_at = $2 WHERE id = $1`, id, now); err != nil {
		return api.CAKey{}, fmt.Errorf("activate %s: %w", id, err)
	}
	k.Active, k.ActivatedAt = true, &now
	return k, nil
}

// Retire stops trusting a key: certificates it signed are refused from the
// next request on, everywhere, and its private half is erased. The CA's
// only key cannot be retired. Retiring the active key hands signing to the
// most recently active of the others (rolling back a rotation).
func (s *Service) Retire(ctx context.Context, tx pgx.Tx, name, id string) (api.CAKey, error) {
	if err := ValidName(name); err != nil {
		return api.CAKey{}, err
	}
	if err := lock(ctx, tx, name); err != nil {
		return api.CAKey{}, err
	}
	id = NormalizeID(id)
	k, err := get(ctx, tx, name, id)
	if err != nil {
		return api.CAKey{}, err
	}
	if k.RetiredAt != nil {
		return api.CAKey{}, api.Errorf(api.CodeConflict, "key %s of the %s CA is already retired", id, name)
	}
	var successor string
	err = tx.QueryRow(ctx, `SELECT id FROM ssh_ca_keys WHERE ca = $1 AND id <> $2 AND retired_at IS NULL
		ORDER BY activated_at DESC NULLS LAST, created_at DESC, id LIMIT 1`, name, id).Scan(&successor)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.CAKey{}, api.Errorf(api.CodeConflict, "key %s is the %s CA's only key", id, name).
			WithHint("rotate first: `gpuaas ops ca rotate --ca " + name + "`")
	}
	if err != nil {
		return api.CAKey{}, fmt.Errorf("retire %s: %w", id, err)
	}
	now := s.now()
	if _, err := tx.Exec(ctx, `UPDATE ssh_ca_keys SET retired_at = $2, active = false, private_key = NULL WHERE id = $1`,
		id, now); err != nil {
		return api.CAKey{}, fmt.Errorf("retire %s: %w", id, err)
	}
	if k.Active {
		if _, err := tx.Exec(ctx, `UPDATE ssh_ca_keys SET active = true, activated_at = $2 WHERE id = $1`,
			successor, now); err != nil {
			return api.CAKey{}, fmt.Errorf("retire %s: promote %s: %w", id, successor, err)
		}
		s.cfg.Log.Warn("retired the active SSH CA key; an older key signs again", "ca", name, "retired", id, "active", successor)
	}
	s.mu.Lock()
	delete(s.signers, id)
	s.mu.Unlock()
	k.Active, k.RetiredAt = false, &now
	return k, nil
}

// NormalizeID accepts a key fingerprint with or without its "SHA256:"
// prefix.
func NormalizeID(id string) string {
	id = strings.TrimSpace(id)
	if id != "" && !strings.HasPrefix(id, "SHA256:") {
		id = "SHA256:" + id
	}
	return id
}

const keyColumns = `SELECT ca, id, public_key, active, created_at, activated_at, retired_at FROM ssh_ca_keys`

func scanKey(r pgx.CollectableRow) (api.CAKey, error) {
	var k api.CAKey
	err := r.Scan(&k.CA, &k.ID, &k.PublicKey, &k.Active, &k.CreatedAt, &k.ActivatedAt, &k.RetiredAt)
	return k, err
}

func get(ctx context.Context, q store.Querier, name, id string) (api.CAKey, error) {
	rows, err := q.Query(ctx, keyColumns+` WHERE ca = $1 AND id = $2`, name, id)
	if err != nil {
		return api.CAKey{}, fmt.Errorf("get CA key: %w", err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, api.Errorf(api.CodeNotFound, "the %s CA has no key %s", name, id).
			WithHint("see `gpuaas ops ca list`")
	}
	if err != nil {
		return k, fmt.Errorf("get CA key: %w", err)
	}
	return k, nil
}

// List returns CA keys: by CA, the active key first, then the other
// trusted keys newest first, then (when asked for) retired ones.
func List(ctx context.Context, q store.Querier, req api.CAListRequest) ([]api.CAKey, error) {
	where, args := `WHERE ($1 = '' OR ca = $1)`, []any{req.CA}
	if req.CA != "" {
		if err := ValidName(req.CA); err != nil {
			return nil, err
		}
	}
	if !req.Retired {
		where += ` AND retired_at IS NULL`
	}
	rows, err := q.Query(ctx, keyColumns+` `+where+`
		ORDER BY array_position(ARRAY['user','host','internal'], ca), active DESC, retired_at IS NOT NULL,
		created_at DESC, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list CA keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanKey)
	if err != nil {
		return nil, fmt.Errorf("list CA keys: %w", err)
	}
	return out, nil
}
