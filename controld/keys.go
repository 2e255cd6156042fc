package controld

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// sessionKeyName names the Ed25519 key that signs session tokens.
const sessionKeyName = "session-token"

// taskKeyName names the Ed25519 key that signs hostd task envelopes.
const taskKeyName = "task-signing"

// loadOrCreateKey returns the named private key, generating it on first
// start. Replicas racing at first start all end up with the one row that
// won the insert. The key lives in Postgres, readable only by controld's
// database role.
func loadOrCreateKey(ctx context.Context, pool *pgxpool.Pool, name string) (ed25519.PrivateKey, error) {
	_, fresh, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", name, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO controld_keys (name, private_key) VALUES ($1, $2)
		ON CONFLICT (name) DO NOTHING`, name, fresh.Seed()); err != nil {
		return nil, fmt.Errorf("store %s key: %w", name, err)
	}
	var seed []byte
	if err := pool.QueryRow(ctx, `SELECT private_key FROM controld_keys WHERE name = $1`, name).Scan(&seed); err != nil {
		return nil, fmt.Errorf("load %s key: %w", name, err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("load %s key: stored key has %d bytes", name, len(seed))
	}
	return ed25519.NewKeyFromSeed(seed), nil
}
