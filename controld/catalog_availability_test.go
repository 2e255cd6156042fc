package controld_test

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestCatalogListShowsAvailability is a money check before renting: `catalog list` showed
// SKUs no host can serve (h100-slice in dev) with no hint. catalog.list
// reports, per SKU, the GPUs free now and the ready nodes able to serve
// it; a bare-metal node counts as free only when wholly free.
func TestCatalogListShowsAvailability(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{}) // the dev fleet: an H200 slice host, an H100 bare-metal host
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	check := func(what string, want map[string]api.SKUAvailability) {
		t.Helper()
		cat, err := c.CatalogList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]api.SKUAvailability{}
		for _, s := range cat.SKUs {
			if s.Availability == nil {
				t.Fatalf("%s: %s has no availability", what, s.ID)
			}
			got[s.ID] = *s.Availability
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s: %s got %+v; want %+v", what, id, got[id], w)
			}
		}
	}
	check("idle fleet", map[string]api.SKUAvailability{
		"h200-slice": {FreeGPUs: 8, Nodes: 1}, "h100-baremetal": {FreeGPUs: 8, Nodes: 1}, "h100-slice": {FreeGPUs: 0, Nodes: 0}})
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	check("busy fleet", map[string]api.SKUAvailability{
		"h200-slice": {FreeGPUs: 6, Nodes: 1}, "h100-baremetal": {FreeGPUs: 0, Nodes: 1}, "h100-slice": {FreeGPUs: 0, Nodes: 0}})
}
