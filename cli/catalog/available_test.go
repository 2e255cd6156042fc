package catalog

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestCatalogListAvailableHidesUnservedSKUs is a money check before renting against a real
// controld with the dev fleet: the list names the SKU no host serves, and
// --available keeps only what can be rented now, which changes as
// capacity is taken.
func TestCatalogListAvailableHidesUnservedSKUs(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	list := func(tty, available bool) (string, string) {
		t.Helper()
		ios, _, out, errOut := cmdtest.Streams(tty)
		opts := &ListOptions{IO: ios, Client: func() (*api.Client, error) { return c, nil }, Available: available}
		if err := listRun(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String()
	}
	ids := func(piped string) string {
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(piped), "\n") {
			out = append(out, strings.Split(line, "\t")[0])
		}
		return strings.Join(out, " ")
	}
	if out, errOut := list(true, false); !strings.Contains(out, "h100-slice") || !strings.Contains(errOut, "No host serves h100-slice now") {
		t.Errorf("the whole list: got\n%s%s\nwant h100-slice listed and said to be served by no host", out, errOut)
	}
	if out, _ := list(false, true); ids(out) != "h200-slice h100-baremetal" {
		t.Errorf("--available: got %q; want h200-slice h100-baremetal", ids(out))
	}
	if _, err := c.AllocCreate(context.Background(), api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	if out, _ := list(false, true); ids(out) != "h200-slice" {
		t.Errorf("--available with the bare-metal node rented: got %q; want h200-slice", ids(out))
	}
}
