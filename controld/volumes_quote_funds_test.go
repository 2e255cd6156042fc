package controld_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestVolumeQuoteSaysFundsRefusal: `volume create --dry-run`
// (volume.quote) is refused for funds exactly as the create would be —
// insufficient_funds on an unfunded project, budget_exceeded over a burn
// cap, each with the create's own message — and writes nothing (no
// volume, task, event, and not even the refusal's audit row the create
// writes); funded and within budget it prices the volume.
func TestVolumeQuoteSaysFundsRefusal(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	req := api.VolumeCreateRequest{Name: "data", Size: "1000G", Node: "sim-h100-1"}
	same := func(name string, code error) {
		t.Helper()
		before := dbSnapshot(t, e.Env)
		_, qerr := c.VolumeQuote(ctx, req)
		sameSnapshot(t, name+": the dry run", before, dbSnapshot(t, e.Env))
		_, cerr := c.VolumeCreate(ctx, req)
		if !errors.Is(cerr, code) {
			t.Fatalf("%s: create %v; want %v", name, cerr, code)
		}
		if !errors.Is(qerr, code) || qerr.Error() != cerr.Error() {
			t.Fatalf("%s: dry run said %v; want what the create says: %v", name, qerr, cerr)
		}
	}
	same("unfunded", api.ErrInsufficientFunds)
	e.credit(t, 3)
	if _, err := c.BillingBudgetSet(ctx, api.BudgetSetRequest{BurnCapMinorPerHour: 10}); err != nil {
		t.Fatal(err)
	}
	same("over a burn cap", api.ErrBudgetExceeded)
	if _, err := c.BillingBudgetClear(ctx, api.BudgetClearRequest{}); err != nil {
		t.Fatal(err)
	}
	if q, err := c.VolumeQuote(ctx, req); err != nil || q.SizeBytes != 1000<<30 {
		t.Fatalf("funded dry run: %+v, %v; want the price of 1000 GiB", q, err)
	}
}
