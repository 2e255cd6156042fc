package controld_test

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAllocGetShowsQueuePosition is the regression test of "the queue
// position is not in `alloc get`": a queued request's get says where it
// is in its SKU's line, which moves up when a request ahead leaves; a
// placed one has none.
func TestAllocGetShowsQueuePosition(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	placed, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	var queued []*api.Allocation
	for range 2 {
		a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Queue: true})
		if err != nil || !a.Queued {
			t.Fatalf("queued create: %+v, %v", a, err)
		}
		queued = append(queued, a)
	}
	position := func(id string) int {
		t.Helper()
		a, err := c.AllocGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return a.QueuePosition
	}
	if p0, p1, pp := position(queued[0].ID), position(queued[1].ID), position(placed.ID); p0 != 1 || p1 != 2 || pp != 0 {
		t.Fatalf("positions %d, %d, placed %d; want 1, 2, 0", p0, p1, pp)
	}
	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: queued[0].ID}); err != nil {
		t.Fatal(err)
	}
	if p := position(queued[1].ID); p != 1 {
		t.Fatalf("after the head left: position %d; want 1", p)
	}
}
