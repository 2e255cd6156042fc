package controld_test

// Benchmarks of placement at fleet scale: one placement's latency at
// 10,000 and 100,000 nodes, and placements per second with 32 at once.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/sched"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// placementFleets are the fleet sizes BenchmarkSchedulerPlacement runs
// at; the largest is skipped under -short.
var placementFleets = []int{10_000, 100_000}

// copySliceNodes adds count ready H200 slice nodes with 8 free slots each
// (4 per NUMA node) by COPY, which builds a 100,000-node fleet (800,000
// slots) in seconds.
func copySliceNodes(b *testing.B, pool *pgxpool.Pool, prefix string, count int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	nodes := make([][]any, count)
	for i := range nodes {
		nodes[i] = []any{fmt.Sprintf("n-%s%d", prefix, i), fmt.Sprintf("%s%d", prefix, i), api.ShapeGPUSlice, "H200", "ready", now, now}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"nodes"},
		[]string{"id", "name", "shape", "gpu_model", "state", "created_at", "updated_at"}, pgx.CopyFromRows(nodes)); err != nil {
		b.Fatalf("copy nodes: %v", err)
	}
	i := 0
	slots := pgx.CopyFromFunc(func() ([]any, error) {
		if i == count*8 {
			return nil, nil
		}
		n, s := i/8, i%8
		i++
		return []any{fmt.Sprintf("sl-%s%d-%d", prefix, n, s), fmt.Sprintf("n-%s%d", prefix, n), s,
			fmt.Sprintf("0000:%02x:00.0", 24+16*s), s / 4, "free"}, nil
	})
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"slots"},
		[]string{"id", "node_id", "idx", "gpu_pci", "numa_node", "state"}, slots); err != nil {
		b.Fatalf("copy slots: %v", err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE nodes; ANALYZE slots; ANALYZE slot_groups`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSchedulerPlacement is one sched.Place against 10,000 and
// 100,000 slice nodes × 8 slots, in a transaction rolled back after each
// placement so that every iteration sees the same fleet. Half the slots
// of the "used" fleet are taken, scattered, as in a busy cluster. It
// reports the latency of Place alone as p50/p99.
func BenchmarkSchedulerPlacement(b *testing.B) {
	for _, fleetNodes := range placementFleets {
		b.Run(fmt.Sprintf("nodes=%d", fleetNodes), func(b *testing.B) {
			if testing.Short() && fleetNodes > 10_000 {
				b.Skip("100,000 nodes: not with -short")
			}
			benchPlacement(b, fleetNodes)
		})
	}
}

func benchPlacement(b *testing.B, fleetNodes int) {
	env := controldtest.Start(b, controldtest.Options{NoNodes: true})
	pool := env.Server.Pool()
	ctx := context.Background()
	copySliceNodes(b, pool, "fleet-", fleetNodes)
	a, err := env.Client(env.AdminToken).AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, Queue: true})
	if err != nil {
		b.Fatal(err)
	}
	// The fleet has room, so a was placed at once. Every Place below
	// places it anew, as it would a queued allocation, which holds no
	// slot: node.ReserveClaimed reads back all of the allocation's
	// reserved slots and refuses a count other than the GPUs asked for.
	if _, err := pool.Exec(ctx, `UPDATE slots SET state = 'free', allocation_id = NULL WHERE allocation_id = $1`, a.ID); err != nil {
		b.Fatal(err)
	}
	filler, err := env.Client(env.AdminToken).AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, fleet := range []string{"free", "half-used"} {
		if fleet == "half-used" {
			if _, err := pool.Exec(ctx, `UPDATE slots SET state = 'reserved', allocation_id = $1
				WHERE state = 'free' AND abs(hashtext(id)) % 2 = 0`, filler.ID); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `ANALYZE slots; ANALYZE slot_groups`); err != nil {
				b.Fatal(err)
			}
		}
		for _, gpus := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("fleet=%s/gpus=%d", fleet, gpus), func(b *testing.B) {
				req := sched.Request{AllocationID: a.ID, Shape: "gpu_slice", GPUModel: "H200", GPUs: gpus}
				durations := make([]time.Duration, 0, 1024)
				b.ResetTimer()
				for b.Loop() {
					tx, err := pool.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					_, err = sched.Place(ctx, tx, req)
					durations = append(durations, time.Since(start))
					_ = tx.Rollback(ctx)
					if err != nil {
						b.Fatalf("place %d GPUs: %v", gpus, err)
					}
				}
				b.StopTimer()
				slices.Sort(durations)
				b.ReportMetric(ms(percentile(durations, 0.50)), "p50-ms")
				b.ReportMetric(ms(percentile(durations, 0.99)), "p99-ms")
				b.ReportMetric(float64(fleetNodes), "nodes")
			})
		}
	}
}

// throughputClients is how many placements BenchmarkPlacementThroughput
// runs at once.
const throughputClients = 32

// BenchmarkPlacementThroughput is placements per second with 32 at once
// on a 10,000-node fleet, each 1 GPU in a transaction of its own that
// commits, and fails on any double booking. op=place is the placement
// alone (allocation row, sched.Place, commit); op=create is a whole
// alloc.create through the API, each client on its own connection.
func BenchmarkPlacementThroughput(b *testing.B) {
	const fleetNodes = 10_000
	env := controldtest.Start(b, controldtest.Options{NoNodes: true, CreditMinor: 1 << 50, MaxConns: throughputClients + 8})
	pool := env.Server.Pool()
	ctx := context.Background()
	copySliceNodes(b, pool, "tp-", fleetNodes)
	reset := func(b *testing.B) {
		if _, err := pool.Exec(ctx, `UPDATE slots SET state = 'free', allocation_id = NULL WHERE state = 'reserved'`); err != nil {
			b.Fatal(err)
		}
		if b.N > fleetNodes*8 {
			b.Fatalf("%d placements of 1 GPU do not fit %d nodes × 8", b.N, fleetNodes)
		}
	}

	b.Run("op=place", func(b *testing.B) {
		reset(b)
		var mu sync.Mutex
		placed := map[string][]string{} // allocation → slot ids
		start := time.Now()
		runConcurrently(b, throughputClients, func(int) error {
			var id string
			var p sched.Placement
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				// The allocation row the slots point at, as
				// storetest.Allocation writes it (which fails the
				// benchmark from this goroutine instead of returning).
				id = ids.New(ids.Allocation)
				now := time.Now().UTC()
				if _, err := tx.Exec(ctx, `INSERT INTO allocations
					(id, project_id, user_id, sku_id, shape, gpus, state, version, queued, created_at, updated_at)
					VALUES ($1, $2, $3, 'h200-slice', $4, 1, $5, 1, false, $6, $6)`,
					id, env.Project.ID, env.Admin.ID, api.ShapeGPUSlice, api.AllocRequested, now); err != nil {
					return err
				}
				var err error
				p, err = sched.Place(ctx, tx, sched.Request{AllocationID: id, Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: 1})
				return err
			})
			if err != nil {
				return err
			}
			ids := make([]string, len(p.Slots))
			for i, s := range p.Slots {
				ids[i] = s.ID
			}
			mu.Lock()
			placed[id] = ids
			mu.Unlock()
			return nil
		})
		elapsed := time.Since(start)
		checkNoDoubleBooking(b, pool, placed, 1)
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "placements/s")
	})

	b.Run("op=create", func(b *testing.B) {
		reset(b)
		cs := make([]*api.Client, throughputClients)
		for i := range cs {
			cs[i] = env.UserClient(b, env.Admin.ID, env.AdminToken)
		}
		var mu sync.Mutex
		placed := map[string][]string{}
		start := time.Now()
		runConcurrently(b, throughputClients, func(w int) error {
			a, err := cs[w].AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
			if err != nil {
				return err
			}
			ids := make([]string, len(a.Slots))
			for i, s := range a.Slots {
				ids[i] = s.ID
			}
			mu.Lock()
			placed[a.ID] = ids
			mu.Unlock()
			return nil
		})
		elapsed := time.Since(start)
		checkNoDoubleBooking(b, pool, placed, 1)
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "placements/s")
	})
}

// checkNoDoubleBooking fails unless every placement got gpus slots no
// other placement got, and the database holds each of them reserved for
// that placement's allocation.
func checkNoDoubleBooking(b *testing.B, pool *pgxpool.Pool, placed map[string][]string, gpus int) {
	b.Helper()
	owner := map[string]string{}
	for alloc, slots := range placed {
		if len(slots) != gpus {
			b.Fatalf("allocation %s got %d slots; want %d", alloc, len(slots), gpus)
		}
		for _, s := range slots {
			if other, ok := owner[s]; ok {
				b.Fatalf("slot %s double-booked: allocations %s and %s", s, other, alloc)
			}
			owner[s] = alloc
		}
	}
	rows, err := pool.Query(context.Background(), `SELECT id, allocation_id FROM slots WHERE state = 'reserved'`)
	if err != nil {
		b.Fatal(err)
	}
	reserved := 0
	for rows.Next() {
		var id, alloc string
		if err := rows.Scan(&id, &alloc); err != nil {
			b.Fatal(err)
		}
		reserved++
		if owner[id] != alloc {
			b.Fatalf("slot %s is reserved for %s; the placements gave it to %q", id, alloc, owner[id])
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if reserved != len(owner) {
		b.Fatalf("reserved slots got %d; want the %d placed", reserved, len(owner))
	}
}
