package node

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// ByPublicKey returns the id of the enrolled node whose hostd holds the
// Ed25519 key pub (its NATS identity too); "" when no node has it.
func ByPublicKey(ctx context.Context, q store.Querier, pub ed25519.PublicKey) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM nodes WHERE public_key = $1`, []byte(pub)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("node by key: %w", err)
	}
	return id, nil
}

// PublicKey returns the Ed25519 key an enrolled node signs with; nil when
// no node has id or the node holds no key (it was registered, not
// enrolled).
func PublicKey(ctx context.Context, q store.Querier, id string) (ed25519.PublicKey, error) {
	var raw []byte
	err := q.QueryRow(ctx, `SELECT public_key FROM nodes WHERE id = $1`, id).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && len(raw) != ed25519.PublicKeySize) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	return ed25519.PublicKey(raw), nil
}
