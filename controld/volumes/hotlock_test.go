package volumes_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// TestLockInProjectForeignLocksNothing: alloc.LockInProject with an
// allocation of another project answers not found, as a missing id does,
// and holds no lock on that allocation meanwhile: its owner's transaction
// locks it at once (NOWAIT) while the stranger's is still open.
func TestLockInProjectForeignLocksNothing(t *testing.T) {
	t.Parallel()
	h := newHot(t)
	ctx := context.Background()
	a := h.alloc(t, h.project, api.AllocActive, h.node.ID)
	stranger, err := h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Rollback(ctx)
	_, err = alloc.LockInProject(ctx, stranger, ids.New(ids.Project), a.ID)
	wantCode(t, err, api.CodeNotFound)
	err = h.in(t, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT id FROM allocations WHERE id = $1 FOR UPDATE NOWAIT`, a.ID)
		return err
	})
	if err != nil {
		t.Fatalf("owner locking its allocation while a stranger's lookup is open: %v; want no wait", err)
	}
}
