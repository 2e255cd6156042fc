package alloc

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestReleaseRacingProvisioningToActiveIsAccepted: hostd's provisioning
// result moves an allocation to active while a user's release is in
// flight. Whichever commits first, the release is accepted (no conflict:
// nobody else changed the allocation, the platform did) and the
// allocation ends releasing, from the state the other left.
func TestReleaseRacingProvisioningToActiveIsAccepted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	owner := Actor{UserID: f.userID, Role: api.RoleUser}
	release := func(tx pgx.Tx, id string) error {
		_, _, err := Release(ctx, tx, owner, api.AllocReleaseRequest{ID: id}, time.Now())
		return err
	}
	provisioned := func(tx pgx.Tx, id string) error {
		_, err := ProvisionDone(ctx, tx, id, hostproto.TaskSucceeded, "", time.Now())
		return err
	}
	tests := []struct {
		name          string
		first, second func(pgx.Tx, string) error // first holds its transaction open while second starts
		wantFrom      string                     // the state the release left
	}{
		{name: "provisioned first", first: provisioned, second: release, wantFrom: api.AllocActive},
		{name: "release first", first: release, second: provisioned, wantFrom: api.AllocProvisioning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := f.insertAlloc(t, api.AllocProvisioning, 1, false)
			tx, err := f.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := tt.first(tx, a.ID); err != nil {
				t.Fatalf("first: %v", err)
			}
			secondErr := make(chan error, 1)
			go func() {
				secondErr <- pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error { return tt.second(tx, a.ID) })
			}()
			waitForLockWaiter(t, f)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-secondErr; err != nil {
				t.Fatalf("second got %v; want nil", err)
			}
			if got := f.row(t, a.ID).state; got != api.AllocReleasing {
				t.Errorf("state got %s; want releasing", got)
			}
			var from string
			if err := f.pool.QueryRow(ctx, `SELECT from_state FROM allocation_transitions
				WHERE allocation_id = $1 AND to_state = 'releasing'`, a.ID).Scan(&from); err != nil {
				t.Fatal(err)
			}
			if from != tt.wantFrom {
				t.Errorf("released from %s; want %s", from, tt.wantFrom)
			}
		})
	}
}
