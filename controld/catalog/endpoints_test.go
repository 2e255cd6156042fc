package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
)

// listed runs catalog.list over q as a user and returns each SKU's
// availability by id; a SKU without one fails the test.
func listed(t *testing.T, q store.Querier) map[string]api.SKUAvailability {
	t.Helper()
	defs := catalog.Endpoints(catalog.Deps{DB: q, Availability: node.Availability})
	r := &endpoint.Request{Principal: &identity.Principal{UserID: "u-renter", Role: api.RoleUser}}
	resp, err := endpointtest.Read[api.CatalogResponse](context.Background(), endpointtest.Find(t, defs, api.EndpointCatalogList), r, api.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]api.SKUAvailability{}
	for _, s := range resp.SKUs {
		if s.Availability == nil {
			t.Fatalf("%s has no availability", s.ID)
		}
		out[s.ID] = *s.Availability
	}
	return out
}

// TestListEndpointGivesEverySKUAnAvailability: with no node at all,
// catalog.list still says of every active SKU that nothing can serve it
// now (zeros, not a missing availability), and lists no retired SKU.
func TestListEndpointGivesEverySKUAnAvailability(t *testing.T) {
	pool := seeded(t)
	if _, err := pool.Exec(context.Background(), `UPDATE skus SET active = false WHERE id = 'h100-slice'`); err != nil {
		t.Fatal(err)
	}
	got := listed(t, pool)
	want := map[string]api.SKUAvailability{"h200-slice": {}, "h100-baremetal": {}}
	if len(got) != len(want) {
		t.Errorf("got %v; want %v", got, want)
	}
	for id, w := range want {
		if av, ok := got[id]; !ok || av != w {
			t.Errorf("%s: got %+v (listed: %v); want %+v", id, av, ok, w)
		}
	}
}

// TestListEndpointCountsEachSKUsOwnNodes: a SKU's availability counts
// the ready nodes of its shape and GPU model only: an H200 slice host
// serves h200-slice, an H100 bare-metal host h100-baremetal, neither
// serves h100-slice, and a draining host serves nothing new.
func TestListEndpointCountsEachSKUsOwnNodes(t *testing.T) {
	pool := seeded(t)
	ctx := context.Background()
	now := time.Now()
	slice, metal := sim.SliceHost("slice-1", "H200"), sim.BaremetalHost("metal-1", "H100")
	draining := sim.SliceHost("slice-draining", "H200")
	for _, spec := range []api.NodeSpec{slice, metal, draining} {
		n, err := node.Register(ctx, pool, spec, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := node.ApproveSlots(ctx, pool, n.ID, nil); err != nil {
			t.Fatal(err)
		}
		if spec.Name == draining.Name {
			if err := node.Drain(ctx, pool, n.ID, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := listed(t, pool)
	want := map[string]api.SKUAvailability{"h200-slice": {Nodes: 1, FreeGPUs: len(slice.Slots)},
		"h100-baremetal": {Nodes: 1, FreeGPUs: len(metal.Slots)}, "h100-slice": {}}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: got %+v; want %+v", id, got[id], w)
		}
	}
}
