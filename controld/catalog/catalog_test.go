package catalog_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("catalog", store.Migrate)

// seeded is a fresh database with the default catalog.
func seeded(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := store.Open(context.Background(), testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := catalog.Seed(context.Background(), pool, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	return pool
}

func wantCode(t *testing.T, what string, err error, code api.Code) {
	t.Helper()
	if got := api.CodeOf(err); got != code {
		t.Errorf("%s: got error %v (code %q); want code %q", what, err, got, code)
	}
}

// TestSeedKeepsOperatorsChanges: seeding again adds only the SKUs that
// do not exist; a price an operator changed stays, and a SKU without
// sizes gets the default vCPUs and memory per GPU.
func TestSeedKeepsOperatorsChanges(t *testing.T) {
	pool := seeded(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE skus SET price_per_gpu_hour_minor = 999 WHERE id = 'h200-slice'`); err != nil {
		t.Fatal(err)
	}
	extra := api.SKU{ID: "a100-slice", Shape: api.ShapeGPUSlice, GPUModel: "A100", GPUCounts: []int{1, 2},
		PricePerGPUHourMinor: 100, Currency: "usd"}
	if err := catalog.Seed(ctx, pool, append(slices.Clone(catalog.Defaults), extra)); err != nil {
		t.Fatal(err)
	}
	got, err := catalog.Get(ctx, pool, "h200-slice")
	if err != nil || got.PricePerGPUHourMinor != 999 {
		t.Errorf("h200-slice after a second seed: price %d, %v; want the operator's 999", got.PricePerGPUHourMinor, err)
	}
	a100, err := catalog.Get(ctx, pool, "a100-slice")
	if err != nil {
		t.Fatal(err)
	}
	if a100.VCPUsPerGPU != 8 || a100.MemoryMiBPerGPU != 65536 || !slices.Equal(a100.GPUCounts, []int{1, 2}) {
		t.Errorf("seeded a100-slice: got %d vCPUs, %d MiB, counts %v per GPU; want 8, 65536, [1 2]",
			a100.VCPUsPerGPU, a100.MemoryMiBPerGPU, a100.GPUCounts)
	}
	all, err := catalog.List(ctx, pool)
	if err != nil || len(all) != len(catalog.Defaults)+1 {
		t.Errorf("list: got %d SKUs, %v; want %d", len(all), err, len(catalog.Defaults)+1)
	}
}

// TestRetiredSKU: a retired SKU is neither listed nor rentable
// (not_found), but still has a price for the allocations placed on it.
func TestRetiredSKU(t *testing.T) {
	pool := seeded(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE skus SET active = false WHERE id = 'h100-slice'`); err != nil {
		t.Fatal(err)
	}
	all, err := catalog.List(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.ID == "h100-slice" {
			t.Error("list: got the retired h100-slice")
		}
	}
	_, err = catalog.Get(ctx, pool, "h100-slice")
	wantCode(t, "get a retired SKU", err, api.CodeNotFound)
	price, cur, err := catalog.Price(ctx, pool, "h100-slice")
	if err != nil || price != 250 || cur != "usd" {
		t.Errorf("price of a retired SKU: got %d %s, %v; want 250 usd", price, cur, err)
	}
	_, _, err = catalog.Price(ctx, pool, "nope")
	wantCode(t, "price of an unknown SKU", err, api.CodeNotFound)
}

// TestUnknownSKUNamesTheOthers: an unknown SKU is not_found, suggests
// the nearest id and lists the available ones in the hint; QueueGet in a
// batch answers exactly as Get does.
func TestUnknownSKUNamesTheOthers(t *testing.T) {
	pool := seeded(t)
	ctx := context.Background()
	_, err := catalog.Get(ctx, pool, "h200-slcie")
	wantCode(t, "unknown SKU", err, api.CodeNotFound)
	var e *api.Error
	if !errors.As(err, &e) {
		t.Fatalf("unknown SKU: got %T; want *api.Error", err)
	}
	if !strings.Contains(e.Message, "h200-slice") {
		t.Errorf("message %q; want it to suggest h200-slice", e.Message)
	}
	for _, s := range catalog.Defaults {
		if !strings.Contains(e.Hint, s.ID) {
			t.Errorf("hint %q; want it to list %s", e.Hint, s.ID)
		}
	}
	for _, id := range []string{"h100-baremetal", "h200-slcie"} {
		want, wantErr := catalog.Get(ctx, pool, id)
		var l catalog.Lookup
		b := &pgx.Batch{}
		catalog.QueueGet(b, &l, id)
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		got, gotErr := l.Result(ctx, pool)
		if api.CodeOf(gotErr) != api.CodeOf(wantErr) || got.ID != want.ID || got.PricePerGPUHourMinor != want.PricePerGPUHourMinor {
			t.Errorf("QueueGet(%s): got %+v, %v; want Get's %+v, %v", id, got, gotErr, want, wantErr)
		}
	}
}

// TestCheckGPUs: only the SKU's GPU counts are allowed; the refusal is
// invalid_argument and names them.
func TestCheckGPUs(t *testing.T) {
	sku := api.SKU{ID: "x", GPUCounts: []int{1, 2, 8}}
	for _, tc := range []struct {
		gpus int
		want api.Code
	}{{1, ""}, {8, ""}, {3, api.CodeInvalidArgument}, {0, api.CodeInvalidArgument}, {-1, api.CodeInvalidArgument}} {
		err := catalog.CheckGPUs(sku, tc.gpus)
		if tc.want == "" {
			if err != nil {
				t.Errorf("CheckGPUs(%d): got %v; want nil", tc.gpus, err)
			}
			continue
		}
		wantCode(t, "CheckGPUs", err, tc.want)
		var e *api.Error
		if errors.As(err, &e) && e.Hint != "allowed GPU counts: 1, 2, 8" {
			t.Errorf("CheckGPUs(%d) hint: got %q; want the allowed counts", tc.gpus, e.Hint)
		}
	}
}
