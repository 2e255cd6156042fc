package node_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/lease"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("node")

// fleet registers nodes heartbeating at the given ages before now.
func fleet(t *testing.T, now time.Time, ages map[string]time.Duration) (*pgxpool.Pool, map[string]string) {
	t.Helper()
	ctx := context.Background()
	pool := storetest.Open(t, pgTemplate, 4)
	ids := map[string]string{}
	for name, age := range ages {
		n, err := node.Register(ctx, pool, node.Spec{Name: name, Shape: api.ShapeGPUSlice, GPUModel: "H200"}, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE nodes SET public_key = convert_to(id, 'UTF8'), last_heartbeat_at = $2 WHERE id = $1`,
			n.ID, now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		ids[n.ID] = name
	}
	return pool, ids
}

// TestSweep: who node liveness marks down.
func TestSweep(t *testing.T) {
	t.Parallel()
	const downAfter, beat = 15 * time.Second, 5 * time.Second
	now := time.Now()
	for _, tc := range []struct {
		name string
		ages map[string]time.Duration
		// receiverAge is how long ago the one receiver renewed its lease.
		receiverAge time.Duration
		want        []string
	}{
		{name: "a silent node among heartbeating ones", ages: map[string]time.Duration{"dead": 20 * time.Second, "live": time.Second},
			want: []string{"dead"}},
		{name: "the whole fleet silent for a while: this side deaf", ages: map[string]time.Duration{"a": 20 * time.Second, "b": 17 * time.Second}},
		{name: "the whole fleet silent for long", ages: map[string]time.Duration{"a": 40 * time.Second, "b": 37 * time.Second},
			want: []string{"a", "b"}},
		{name: "a receiver that stopped renewing may have swallowed heartbeats",
			ages: map[string]time.Duration{"dead": 20 * time.Second, "live": time.Second}, receiverAge: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, ids := fleet(t, now, tc.ages)
			ctx := context.Background()
			if _, ok, err := lease.TryAcquire(ctx, pool, lease.ReceiverPrefix+"r1", "r1", time.Hour); err != nil || !ok {
				t.Fatalf("receiver lease: %v, %v", ok, err)
			}
			if _, err := pool.Exec(ctx, `UPDATE leases SET renewed_at = clock_timestamp() - $1 * interval '1 millisecond'`,
				tc.receiverAge.Milliseconds()); err != nil {
				t.Fatal(err)
			}
			down, _, err := node.Sweep(ctx, pool, downAfter, beat, now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, id := range down {
				got = append(got, ids[id])
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("marked down %v; want %v", got, tc.want)
			}
		})
	}
}
