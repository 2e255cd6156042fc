package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// t0 is the tests' clock reading.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	return pool
}

// slicedNode registers a ready gpu_slice node of n approved slots, GPU i
// at PCI 0000:1i:00.0, all on NUMA node 0.
func slicedNode(t *testing.T, pool *pgxpool.Pool, name string, n int) api.Node {
	t.Helper()
	spec := node.Spec{Name: name, Shape: api.ShapeGPUSlice, GPUModel: "H200"}
	for i := range n {
		spec.Slots = append(spec.Slots, node.SlotSpec{GPUPCI: gpu(i)})
	}
	created, err := node.Register(context.Background(), pool, spec, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.ApproveSlots(context.Background(), pool, created.ID, nil); err != nil {
		t.Fatal(err)
	}
	return created
}

func gpu(i int) string { return fmt.Sprintf("0000:1%d:00.0", i) }

// inTx runs fn in a transaction committed only when fn succeeds, as a
// mutation does.
func inTx(pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(context.Background(), pool, fn)
}
