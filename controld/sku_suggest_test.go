package controld_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestUnknownSKUSuggestsNearMiss is the regression test of "near misses
// get no `did you mean`": an unknown SKU close to one of the catalog's is
// not_found with the SKU it was probably meant to be; one like none of
// them lists what exists.
func TestUnknownSKUSuggestsNearMiss(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	tests := []struct{ sku, want string }{
		{"h200-slcie", `unknown SKU "h200-slcie"; did you mean h200-slice?`},
		{"h100-node", `unknown SKU "h100-node"; did you mean h100-slice or h100-baremetal?`},
		{"a100", `unknown SKU "a100"`},
	}
	for _, tt := range tests {
		_, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: tt.sku, GPUs: 1})
		var apiErr *api.Error
		if !errors.Is(err, api.ErrNotFound) || !errors.As(err, &apiErr) || apiErr.Message != tt.want ||
			!strings.Contains(apiErr.Hint, "available: ") {
			t.Errorf("create %s: %v; want not_found %q with the available SKUs", tt.sku, err, tt.want)
		}
	}
}
