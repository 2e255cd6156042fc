package hosts

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestReportSeqCachedWindowOfAnotherReplicaRefusesReplay: a replica
// claims a node's report numbers with one compare-and-set from the
// window it cached; once another replica moved the stored window, that
// cache is stale, and a number either replica took already is still
// refused by both (the claim falls back to the locked window), while new
// numbers keep being taken by either.
func TestReportSeqCachedWindowOfAnotherReplicaRefusesReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	nodeID := ids.New(ids.Node)
	if _, err := pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
		VALUES ($1, 'node-1', 'gpu_slice', 'H200', 'ready', $2, $2)`, nodeID, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	nc := testutil.NATS(t).Connect(t)
	replica := func() *Service {
		s, err := New(withDomains(t, pool, Config{Pool: pool, NATS: nc, TaskKey: key}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := replica(), replica()
	steps := []struct {
		by   *Service
		name string
		seq  uint64
		ok   bool
	}{
		{a, "a", 5, true},  // locked: nothing cached yet
		{a, "a", 6, true},  // compare-and-set
		{a, "a", 4, true},  // late, inside the window
		{b, "b", 8, true},  // b moves the window: a's cache is stale
		{a, "a", 6, false}, // a's own, refused by its cache and the stored window
		{a, "a", 8, false}, // b's: a's cache would take it, the stored window refuses
		{a, "a", 7, true},  // new to both
		{b, "b", 7, false}, // b's cache (high 8, no 7) would take it
		{b, "b", 9, true},
		{a, "a", 9, false},
		{a, "a", 10, true},
		{a, "a", 11, true},  // a's cache is current again
		{a, "a", 11, false}, // refused by the cache, then the stored window
	}
	for i, s := range steps {
		err := s.by.claimSeq(ctx, nodeID, s.seq)
		if s.ok && err != nil || !s.ok && !errors.Is(err, errReplayed) {
			t.Fatalf("step %d: %s claims %d: %v; want taken %v", i, s.name, s.seq, err, s.ok)
		}
	}
}
