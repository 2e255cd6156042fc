package controld_test

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestNodeListCountsOpenTasks: an allocation's provisioning task waits on
// its node (no hostd answers here), and node.list shows it open there.
func TestNodeListCountsOpenTasks(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	open := func() map[string]int {
		t.Helper()
		resp, err := c.NodeList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, n := range resp.Nodes {
			out[n.ID] = n.TasksOpen
		}
		return out
	}
	for id, n := range open() {
		if n != 0 {
			t.Fatalf("node %s has %d open tasks before any allocation", id, n)
		}
	}
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range open() {
		want := 0
		if id == a.NodeID {
			want = 1
		}
		if n != want {
			t.Errorf("node %s has %d open tasks; want %d (allocation on %s)", id, n, want, a.NodeID)
		}
	}
}
