package controld_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestVolumeCreateNeedsFunds: a volume is refused as an allocation is
// when the project cannot pay for it — insufficient_funds on a balance
// that does not last the minimum runway with the volume's burn (an
// unfunded or depleted project), budget_exceeded over a burn cap naming
// the volume — and the refusal writes nothing; a grow is checked for what
// it adds. Funded, the same create goes ahead.
func TestVolumeCreateNeedsFunds(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	req := api.VolumeCreateRequest{Name: "data", Size: "1000G", Node: "sim-h100-1"}

	before := dbSnapshot(t, e.Env)
	_, err := c.VolumeCreate(ctx, req)
	if !errors.Is(err, api.ErrInsufficientFunds) || !strings.Contains(err.Error(), "$0.03 is needed") {
		t.Fatalf("unfunded create: %v; want insufficient_funds needing $0.03 (10 minutes at $0.14/h)", err)
	}
	refusedNothing(t, e, before, "volume.create_refused", 0)

	e.credit(t, 3)
	if _, err := c.BillingBudgetSet(ctx, api.BudgetSetRequest{BurnCapMinorPerHour: 10}); err != nil {
		t.Fatal(err)
	}
	before = dbSnapshot(t, e.Env)
	_, err = c.VolumeCreate(ctx, req)
	if !errors.Is(err, api.ErrBudgetExceeded) || !strings.Contains(err.Error(), "$0.14/h for this one") {
		t.Fatalf("create over a burn cap of $0.10/h: %v; want budget_exceeded", err)
	}
	refusedNothing(t, e, before, "volume.create_refused", 0)
	if _, err := c.BillingBudgetClear(ctx, api.BudgetClearRequest{}); err != nil {
		t.Fatal(err)
	}
	v, err := c.VolumeCreate(ctx, req)
	if err != nil {
		t.Fatalf("funded create: %v", err)
	}
	e.settleVolumeAt(t, v, api.TaskVolumeCreate)

	// Growing to 3000G adds 2000 GiB (28/h): 5 more minor units for 10
	// minutes, and the balance holds only the first volume's 3.
	before = dbSnapshot(t, e.Env)
	_, err = c.VolumeResize(ctx, api.VolumeResizeRequest{Volume: "data", Size: "3000G"})
	if !errors.Is(err, api.ErrInsufficientFunds) {
		t.Fatalf("unfunded grow: %v; want insufficient_funds", err)
	}
	refusedNothing(t, e, before, "volume.resize_refused", 1)
	e.clock.Advance(time.Second) // credit's reference is the clock's instant
	e.credit(t, 10)
	if _, err := c.VolumeResize(ctx, api.VolumeResizeRequest{Volume: "data", Size: "3000G"}); err != nil {
		t.Fatalf("funded grow: %v", err)
	}
}

// refusedNothing checks that a refused volume change wrote only its
// refusal's audit row (action), which names the request's Idempotency-Key:
// no task, event or idempotency record, and the project's volumes are
// wantVolumes, none growing.
func refusedNothing(t *testing.T, e *billingEnv, before map[string]string, action string, wantVolumes int) {
	t.Helper()
	after := dbSnapshot(t, e.Env)
	after["audit_logs"], before["audit_logs"] = "", ""
	sameSnapshot(t, "a refused "+action, before, after)
	var volumes, growing, refusals, keyless int
	if err := e.Server.Pool().QueryRow(t.Context(), `SELECT (SELECT count(*) FROM volumes),
		(SELECT count(*) FROM volumes WHERE resizing_to <> 0), (SELECT count(*) FROM audit_logs WHERE action = $1),
		(SELECT count(*) FROM audit_logs WHERE action = $1 AND idempotency_key = '')`,
		action).Scan(&volumes, &growing, &refusals, &keyless); err != nil {
		t.Fatal(err)
	}
	if volumes != wantVolumes || growing != 0 {
		t.Errorf("after a refused %s: %d volumes, %d growing; want %d, none growing", action, volumes, growing, wantVolumes)
	}
	if refusals == 0 || keyless != 0 {
		t.Errorf("%d %s audit rows, %d without the request's Idempotency-Key; want some, all with it", refusals, action, keyless)
	}
}
