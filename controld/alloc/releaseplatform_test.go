package alloc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestReleaseAfterPlatformReleaseIsAccepted: a user's release of an
// allocation the platform (billing, its balance run out) already released
// is accepted and changes nothing, with a note saying so; one released by
// another person still gets conflict.
func TestReleaseAfterPlatformReleaseIsAccepted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	owner := Actor{UserID: f.userID, Role: api.RoleUser}
	tests := []struct {
		name, by, state string
		wantNote        bool
	}{
		{name: "billing released it", by: "system:billing", state: api.AllocReleasing, wantNote: true},
		{name: "billing release done", by: "system:billing", state: api.AllocReleased, wantNote: true},
		{name: "another person released it", by: "u-someoneelse", state: api.AllocReleasing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := f.insertAlloc(t, tt.state, 3, false)
			if _, err := f.pool.Exec(ctx, `INSERT INTO allocation_transitions (allocation_id, from_state, to_state, reason, actor_id, at)
				VALUES ($1, 'active', 'releasing', 'the balance ran out', $2, now())`, a.ID, tt.by); err != nil {
				t.Fatal(err)
			}
			var got api.Allocation
			err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
				var err error
				got, _, err = Release(ctx, tx, owner, api.AllocReleaseRequest{ID: a.ID}, time.Now())
				return err
			})
			if !tt.wantNote {
				if api.CodeOf(err) != api.CodeConflict {
					t.Fatalf("got %v; want conflict", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v; want accepted", err)
			}
			if got.State != tt.state || !strings.Contains(got.Note, "the platform released it") {
				t.Errorf("reply: state %s, note %q; want %s and a note", got.State, got.Note, tt.state)
			}
			if row := f.row(t, a.ID); row.state != tt.state {
				t.Errorf("state %s; want %s unchanged", row.state, tt.state)
			}
		})
	}
}
