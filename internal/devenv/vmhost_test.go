package devenv

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

var vmCatalogTemplate = testutil.NewTemplate("devenv-vm", store.Migrate)

// TestVMCatalog: with --vm the H200 slice SKU boots the guest image sized
// for TCG and the other SKUs are the defaults; a catalog seeded without
// --vm (a data directory made before) is refused with the hint to reset,
// and one seeded with it passes.
func TestVMCatalog(t *testing.T) {
	v := &vmHost{image: api.VMImage{Name: "0123456789abcdef", SHA256: strings.Repeat("a", 64)}, vcpus: 1, memMiB: 384}
	skus := catalogFor(v)
	for i, s := range skus {
		def := catalog.Defaults[i]
		if s.Shape == api.ShapeGPUSlice && s.GPUModel == "H200" {
			if s.Image != v.image || s.VCPUsPerGPU != 1 || s.MemoryMiBPerGPU != 384 {
				t.Errorf("%s = %+v; want the guest image, 1 vCPU and 384 MiB per GPU", s.ID, s)
			}
		} else if s.Image != def.Image || s.VCPUsPerGPU != def.VCPUsPerGPU {
			t.Errorf("%s changed: %+v", s.ID, s)
		}
	}
	if catalogFor(nil)[0].Image != catalog.Defaults[0].Image || catalog.Defaults[0].Image == v.image {
		t.Error("catalogFor changed the defaults")
	}

	ctx := context.Background()
	open := func() *pgxpool.Pool {
		t.Helper()
		pool, err := store.Open(ctx, testutil.Postgres(t, vmCatalogTemplate), 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	before := open()
	if err := catalog.Seed(ctx, before, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	if err := catalog.Seed(ctx, before, skus); err != nil { // a later start with --vm keeps the SKU
		t.Fatal(err)
	}
	if err := v.checkCatalog(ctx, before); err == nil || !strings.Contains(err.Error(), "--reset") {
		t.Errorf("checkCatalog on a catalog made without --vm = %v; want a refusal saying --reset", err)
	}
	fresh := open()
	if err := catalog.Seed(ctx, fresh, skus); err != nil {
		t.Fatal(err)
	}
	if err := v.checkCatalog(ctx, fresh); err != nil {
		t.Errorf("checkCatalog on a catalog made with --vm: %v", err)
	}
}
