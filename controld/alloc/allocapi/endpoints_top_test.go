package allocapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestTopRefusesWithoutAskingTheNode: alloc.top of an allocation that
// has no GPUs yet is a conflict that says to wait, one that has none any
// more a conflict without that hint, and one the caller may not read is
// not_found; no node is asked in any of these.
func TestTopRefusesWithoutAskingTheNode(t *testing.T) {
	t.Parallel()
	s := serve(t)
	top := endpointtest.Find(t, s.defs, api.EndpointAllocTop)
	var asked atomic.Int32
	if _, err := s.nc.Subscribe(hostproto.MsgTop.Wildcard(), func(*nats.Msg) { asked.Add(1) }); err != nil {
		t.Fatal(err)
	}
	requested := storetest.Allocation(t, s.pool, api.Allocation{ProjectID: s.one, UserID: s.user, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, Queued: true})
	released := storetest.Allocation(t, s.pool, api.Allocation{ProjectID: s.one, UserID: s.user, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, State: api.AllocReleased})
	for _, tc := range []struct {
		name, user, id string
		want           api.Code
		hint           bool
	}{
		{"requested", s.user, requested.ID, api.CodeConflict, true},
		{"released", s.user, released.ID, api.CodeConflict, false},
		{"not the caller's", s.stranger, requested.ID, api.CodeNotFound, false},
	} {
		_, err := endpointtest.Read[api.AllocTopResponse](context.Background(), top, as(t, tc.user, "", ""), api.AllocRef{ID: tc.id})
		wantCode(t, tc.name, err, tc.want)
		var e *api.Error
		if tc.want == api.CodeConflict && (!errorAs(err, &e) || (e.Hint != "") != tc.hint) {
			t.Errorf("%s: got hint %q; want a hint to wait: %v", tc.name, hintOf(e), tc.hint)
		}
	}
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := asked.Load(); got != 0 {
		t.Errorf("nodes asked by refused requests: got %d; want 0", got)
	}
}

// TestTopShowsOnlyTheAllocationsGPUs: alloc.top asks the allocation's
// node about its GPUs, by PCI address in order, and of the node's answer
// keeps only those, numbered by their position in the allocation: a node
// that answers about other GPUs does not leak them. A node that does not
// answer is unavailable.
func TestTopShowsOnlyTheAllocationsGPUs(t *testing.T) {
	t.Parallel()
	s := serve(t)
	ctx := context.Background()
	a, err := s.create(t, "k-top", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := alloc.ProvisionDone(ctx, tx, a.ID, hostproto.TaskSucceeded, "", t0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, sl := range a.Slots {
		mine = append(mine, sl.GPUPCI)
	}
	slices.Sort(mine)
	if len(mine) != 2 {
		t.Fatalf("slots of %s: got %v; want 2", a.ID, mine)
	}
	top := endpointtest.Find(t, s.defs, api.EndpointAllocTop)
	_, err = endpointtest.Read[api.AllocTopResponse](ctx, top, as(t, s.user, "", ""), api.AllocRef{ID: a.ID})
	wantCode(t, "no hostd", err, api.CodeUnavailable)

	asked := make(chan hostproto.HostTopRequest, 1)
	if _, err := s.nc.Subscribe(hostproto.MsgTop.SubjectOf(s.node.ID), func(m *nats.Msg) {
		var req hostproto.HostTopRequest
		_ = json.Unmarshal(m.Data, &req)
		asked <- req
		// The node answers about the allocation's GPUs in reverse, and
		// about one that is not the allocation's.
		body, _ := json.Marshal(hostproto.HostTopResponse{GPUs: []api.GPUSample{
			{Index: 7, PCI: mine[1], UUID: "GPU-second"}, {Index: 3, PCI: "0000:ff:00.0", UUID: "GPU-foreign"},
			{Index: 5, PCI: mine[0], UUID: "GPU-first"}}})
		_ = m.Respond(body)
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := endpointtest.Read[api.AllocTopResponse](ctx, top, as(t, s.user, "", ""), api.AllocRef{ID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	if req := <-asked; !slices.Equal(req.PCIs, mine) {
		t.Errorf("the node was asked about %v; want %v", req.PCIs, mine)
	}
	var got []string
	for _, g := range resp.GPUs {
		got = append(got, fmt.Sprintf("%s@%d", g.UUID, g.Index))
	}
	if want := []string{"GPU-first@0", "GPU-second@1"}; resp.AllocationID != a.ID || !slices.Equal(got, want) {
		t.Errorf("top of %s: got %s %v; want %v", a.ID, resp.AllocationID, got, want)
	}
}
