package alloc

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
)

// LockInProject locks allocation id for a transaction that changes what
// it has (a volume attached to it while it runs: controld/volumes,
// hot.go) and returns it; one of another project is not found, as for an
// id that does not exist. The allocation's lock is taken before its
// volumes', as its release does.
func LockInProject(ctx context.Context, tx pgx.Tx, projectID, id string) (api.Allocation, error) {
	a, err := lockAndLoad(ctx, tx, id)
	if err != nil {
		return api.Allocation{}, err
	}
	if a.ProjectID != projectID {
		return api.Allocation{}, notFound(id)
	}
	return a, nil
}
