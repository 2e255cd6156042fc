package alloc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
)

// LockInProject locks allocation id for a transaction that changes what
// it has (a volume attached to it while it runs: controld/volumes,
// hot.go) and returns it; one of another project is not found, as for an
// id that does not exist. The allocation's lock is taken before its
// volumes', as its release does.
//
// The project is in the locking query: an id of another project locks
// nothing (a tenant cannot hold up another's release) and answers as a
// missing one, in the same time.
func LockInProject(ctx context.Context, tx pgx.Tx, projectID, id string) (api.Allocation, error) {
	var locked string
	err := tx.QueryRow(ctx, `SELECT id FROM allocations WHERE id = $1 AND project_id = $2 FOR UPDATE`, id, projectID).Scan(&locked)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Allocation{}, notFound(id)
	}
	if err != nil {
		return api.Allocation{}, fmt.Errorf("lock allocation: %w", err)
	}
	return load(ctx, tx, id)
}
