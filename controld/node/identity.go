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
