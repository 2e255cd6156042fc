package controld_test

import (
	"context"
	"strings"
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

// TestQueueOnUnservedSKUSaysSo is the regression test of "`--queue` on a
// SKU no host serves is accepted silently": the request is queued (an
// operator may be adding the host) and the reply's note says no host
// serves it and how to cancel; a SKU whose hosts are only busy gets none.
func TestQueueOnUnservedSKUSaysSo(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1, Queue: true})
	if err != nil || !a.Queued || !strings.Contains(a.Note, "no host serves 1 × h100-slice now") ||
		!strings.Contains(a.Note, "gpuaas alloc release "+a.ID) {
		t.Fatalf("queued on an unserved SKU: %+v, %v; want queued with a note that no host serves it", a, err)
	}
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	busy, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Queue: true})
	if err != nil || !busy.Queued || busy.Note != "" {
		t.Fatalf("queued behind a busy host: %+v, %v; want queued, no note", busy, err)
	}
}
