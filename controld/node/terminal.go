package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Terminal returns where a node's hostd serves terminals ("host:port") and
// the host key it serves them with, as the node last reported them; empty
// when it serves none.
func Terminal(ctx context.Context, q store.Querier, nodeID string) (addr, hostKey string, err error) {
	err = q.QueryRow(ctx, `SELECT terminal_addr, terminal_host_key FROM nodes WHERE id = $1`, nodeID).Scan(&addr, &hostKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", api.Errorf(api.CodeNotFound, "node %s not found", nodeID)
	}
	if err != nil {
		return "", "", fmt.Errorf("terminal of %s: %w", nodeID, err)
	}
	return addr, hostKey, nil
}
