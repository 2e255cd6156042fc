package alloc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// allStates is every allocation state (docs/architecture.md, "Flows").
var allStates = []string{
	api.AllocRequested, api.AllocProvisioning, api.AllocActive, api.AllocReleasing,
	api.AllocReleased, api.AllocFailed, api.AllocReleaseFailed,
}

// lifecycle is the lifecycle of docs/architecture.md written out independently of
// the transitions table, so that a change to one without the other fails.
var lifecycle = map[[2]string]bool{
	{api.AllocRequested, api.AllocProvisioning}:  true, // placed
	{api.AllocRequested, api.AllocReleased}:      true, // queued request withdrawn
	{api.AllocRequested, api.AllocFailed}:        true,
	{api.AllocProvisioning, api.AllocActive}:     true,
	{api.AllocProvisioning, api.AllocFailed}:     true,
	{api.AllocProvisioning, api.AllocReleasing}:  true,
	{api.AllocActive, api.AllocReleasing}:        true,
	{api.AllocReleasing, api.AllocReleased}:      true,
	{api.AllocReleasing, api.AllocReleaseFailed}: true,
	{api.AllocFailed, api.AllocReleasing}:        true, // operator cleanup (release --force)
	{api.AllocReleaseFailed, api.AllocReleasing}: true, // operator retry (release --force)
}

func TestTransitionTableCoversEveryState(t *testing.T) {
	if got, want := len(transitions), len(allStates); got != want {
		t.Errorf("transitions has %d states; want %d", got, want)
	}
	for _, s := range allStates {
		if _, ok := transitions[s]; !ok {
			t.Errorf("state %s missing from transitions", s)
		}
		if got, want := Terminal(s), s == api.AllocReleased; got != want {
			t.Errorf("Terminal(%s) got %v; want %v", s, got, want)
		}
	}
}

func TestCanTransitionEveryPair(t *testing.T) {
	for _, from := range allStates {
		for _, to := range allStates {
			want := lifecycle[[2]string{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) got %v; want %v", from, to, got, want)
			}
		}
	}
	for _, s := range []string{"", "bogus"} {
		if CanTransition(s, api.AllocActive) || CanTransition(api.AllocRequested, s) {
			t.Errorf("CanTransition accepts unknown state %q", s)
		}
	}
}

// allocRow is what a transition may change.
type allocRow struct {
	state   string
	version int64
	queued  bool
}

func (f *fixture) row(t *testing.T, id string) allocRow {
	t.Helper()
	var r allocRow
	if err := f.pool.QueryRow(context.Background(), `SELECT state, version, queued FROM allocations WHERE id=$1`, id).
		Scan(&r.state, &r.version, &r.queued); err != nil {
		t.Fatalf("read allocation: %v", err)
	}
	return r
}

type transitionRow struct{ from, to, reason, actor string }

func (f *fixture) transitionRows(t *testing.T, id string) []transitionRow {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT from_state, to_state, reason, actor_id
		FROM allocation_transitions WHERE allocation_id=$1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (transitionRow, error) {
		var tr transitionRow
		return tr, r.Scan(&tr.from, &tr.to, &tr.reason, &tr.actor)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// transitionTx runs transition in a transaction of its own and commits
// whatever it did, so the checks read committed state.
func (f *fixture) transitionTx(t *testing.T, a *api.Allocation, to string) error {
	t.Helper()
	var terr error
	err := pgx.BeginFunc(context.Background(), f.pool, func(tx pgx.Tx) error {
		terr = transition(context.Background(), tx, a, to, "test "+to, "u-tester", time.Now().UTC())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return terr
}

func TestTransitionEveryPairAgainstDB(t *testing.T) {
	f := newFixture(t)
	const version = 5
	for _, from := range allStates {
		for _, to := range allStates {
			legal := lifecycle[[2]string{from, to}]
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				a := f.insertAlloc(t, from, version, false)
				err := f.transitionTx(t, &a, to)
				got := f.row(t, a.ID)
				trs := f.transitionRows(t, a.ID)
				if !legal {
					if !errors.Is(err, api.ErrConflict) {
						t.Fatalf("illegal change got error %v; want conflict", err)
					}
					if want := (allocRow{from, version, false}); got != want {
						t.Errorf("row after illegal change got %+v; want %+v", got, want)
					}
					if a.State != from || a.Version != version {
						t.Errorf("in-memory allocation got %s v%d; want %s v%d", a.State, a.Version, from, version)
					}
					if len(trs) != 0 {
						t.Errorf("illegal change wrote %d transition rows; want 0", len(trs))
					}
					return
				}
				if err != nil {
					t.Fatalf("legal change got error %v; want nil", err)
				}
				if want := (allocRow{to, version + 1, false}); got != want {
					t.Errorf("row got %+v; want %+v", got, want)
				}
				if a.State != to || a.Version != version+1 || a.Reason != "test "+to {
					t.Errorf("in-memory allocation got %s v%d %q; want %s v%d", a.State, a.Version, a.Reason, to, version+1)
				}
				want := transitionRow{from, to, "test " + to, "u-tester"}
				if len(trs) != 1 || trs[0] != want {
					t.Errorf("transition rows got %+v; want [%+v]", trs, want)
				}
			})
		}
	}
}

func TestTransitionStaleVersion(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name     string
		stored   int64
		believed int64
	}{
		{"older", 5, 4},
		{"newer", 5, 6},
		{"much older", 7, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := f.insertAlloc(t, api.AllocProvisioning, tt.stored, false)
			a.Version = tt.believed
			err := f.transitionTx(t, &a, api.AllocActive)
			if !errors.Is(err, api.ErrConflict) {
				t.Fatalf("got %v; want conflict", err)
			}
			if got, want := f.row(t, a.ID), (allocRow{api.AllocProvisioning, tt.stored, false}); got != want {
				t.Errorf("row got %+v; want %+v", got, want)
			}
			if n := len(f.transitionRows(t, a.ID)); n != 0 {
				t.Errorf("got %d transition rows; want 0", n)
			}
			if a.State != api.AllocProvisioning || a.Version != tt.believed {
				t.Errorf("in-memory allocation got %s v%d; want it untouched", a.State, a.Version)
			}
		})
	}
}

// TestTransitionConcurrentWriterWins has a second transaction change the
// row while the first holds the same version: the first to commit wins,
// the one waiting on the row lock sees the new version and gets conflict.
func TestTransitionConcurrentWriterWins(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	orig := f.insertAlloc(t, api.AllocActive, 3, false)

	winner, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = winner.Rollback(ctx) }()
	wa := orig
	if err := transition(ctx, winner, &wa, api.AllocReleasing, "winner", "u-winner", time.Now()); err != nil {
		t.Fatalf("winner got %v; want nil", err)
	}

	loserErr := make(chan error, 1)
	go func() {
		la := orig
		loserErr <- f.transitionTxErr(&la, api.AllocReleasing)
	}()
	// Commit only once the loser is blocked on the row lock, so the test
	// exercises the re-check of version=$2 after the wait.
	waitForLockWaiter(t, f)
	if err := winner.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-loserErr; !errors.Is(err, api.ErrConflict) {
		t.Fatalf("loser got %v; want conflict", err)
	}
	if got, want := f.row(t, orig.ID), (allocRow{api.AllocReleasing, 4, false}); got != want {
		t.Errorf("row got %+v; want %+v", got, want)
	}
	if trs := f.transitionRows(t, orig.ID); len(trs) != 1 || trs[0].actor != "u-winner" {
		t.Errorf("transition rows got %+v; want one by u-winner", trs)
	}
}

func (f *fixture) transitionTxErr(a *api.Allocation, to string) error {
	var terr error
	err := pgx.BeginFunc(context.Background(), f.pool, func(tx pgx.Tx) error {
		terr = transition(context.Background(), tx, a, to, "loser", "u-loser", time.Now())
		return nil
	})
	return errors.Join(err, terr)
}

// waitForLockWaiter polls until some session of the test database waits
// on a lock.
func waitForLockWaiter(t *testing.T, f *fixture) {
	t.Helper()
	testutil.EventuallyWithin(t, 10*time.Second, "a session waiting on the row lock", func() bool {
		var n int
		if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

func TestTransitionLeavingRequestedClearsQueued(t *testing.T) {
	f := newFixture(t)
	for _, to := range []string{api.AllocProvisioning, api.AllocReleased, api.AllocFailed} {
		t.Run(to, func(t *testing.T) {
			a := f.insertAlloc(t, api.AllocRequested, 1, true)
			if err := f.transitionTx(t, &a, to); err != nil {
				t.Fatal(err)
			}
			if got, want := f.row(t, a.ID), (allocRow{to, 2, false}); got != want {
				t.Errorf("row got %+v; want %+v", got, want)
			}
			if a.Queued {
				t.Error("in-memory allocation still queued; want not queued")
			}
		})
	}
}
