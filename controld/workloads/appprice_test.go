package workloads_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// priceApp publishes and promotes the app name of image tiny (a platform
// app when projectID is "") and, for a platform app, sets its price.
func (w *world) priceApp(t *testing.T, name, projectID string, perHour int64) api.App {
	t.Helper()
	ctx := context.Background()
	var tiny string
	if err := w.pool.QueryRow(ctx, `SELECT id FROM images WHERE name = 'tiny'`).Scan(&tiny); err != nil {
		t.Fatal(err)
	}
	app, err := apps.Publish(ctx, w.pool, apps.New{Name: name, ProjectID: projectID, ImageID: tiny, By: w.bob.UserID,
		Manifest: api.AppManifest{Command: []string{"/bin/httpd"}, GPUs: 0}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if app, err = apps.Apply(ctx, w.pool, app.ID, api.ImagePromoted, t0); err != nil {
		t.Fatal(err)
	}
	if projectID == "" {
		w.setPrice(t, name, perHour)
	}
	return app
}

func (w *world) setPrice(t *testing.T, app string, perHour int64) {
	t.Helper()
	if err := w.tx(t, func(tx pgx.Tx) error {
		_, err := apps.SetPrice(context.Background(), tx, app, billing.DefaultCurrency, perHour, t0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// accrue runs the accrual up to upTo.
func (w *world) accrue(t *testing.T, upTo time.Time) {
	t.Helper()
	if err := w.tx(t, func(tx pgx.Tx) error {
		_, err := billing.Accrue(context.Background(), tx, upTo, upTo)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// appBooked is minus the sum of the project's ledger entries of kind app
// for workload id, and how many there are.
func (w *world) appBooked(t *testing.T, id string) (sum int64, n int) {
	t.Helper()
	if err := w.pool.QueryRow(context.Background(), `SELECT coalesce(-sum(amount_minor), 0)::bigint, count(*) FROM ledger_entries
		WHERE kind = 'app' AND reference LIKE 'app:' || $1 || ':%'`, id).Scan(&sum, &n); err != nil {
		t.Fatal(err)
	}
	return sum, n
}

// TestAppPriceChargedThroughTheAllocation (docs/apps.md, "Prices"): a
// workload of a priced platform app copies the price when it is run; its
// app meter starts when it runs and charges price × running seconds /
// 3600 in the accrual windows, as ledger entries of kind app, on top of
// the allocation's charge; a window accrued again charges nothing more; a
// price change after the start leaves the running workload's rate; the
// workload's end stops its meter with its last window; the allocation's
// release stops the meters of the workloads still running (charged
// through it, never beyond); the burn and budgets count app meters; a
// project's own app has no price and its workloads no meter.
func TestAppPriceChargedThroughTheAllocation(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	if err := w.tx(t, func(tx pgx.Tx) error {
		return billing.StartMeter(ctx, tx, billing.Meter{AllocationID: w.allocID, ProjectID: w.project, UserID: w.bob.UserID,
			SKU: "h100-baremetal", GPUs: 8, PricePerGPUHourMinor: 220, Currency: billing.DefaultCurrency}, t0)
	}); err != nil {
		t.Fatal(err)
	}
	w.priceApp(t, "jup", "", 360) // a cent per 10 s
	wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "jup", AllocationID: w.allocID})
	if err != nil {
		t.Fatal(err)
	}
	if wl.AppPricePerHourMinor != 360 || wl.AppID == "" {
		t.Fatalf("run: %+v; want the app's price 360 copied", wl)
	}
	started := t0.Add(time.Minute)
	taskID, typ, _ := w.currentTask(t, wl.ID)
	w.settleAt(t, taskID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerRunning, StartedAt: &started}), started)
	// The price changes after the start: the running workload keeps 360.
	w.setPrice(t, "jup", 720)

	w.accrue(t, t0.Add(11*time.Minute)) // 600 s of it: 60
	if sum, n := w.appBooked(t, wl.ID); sum != 60 || n != 1 {
		t.Errorf("after the first window: %d in %d entries; want 60 in 1", sum, n)
	}
	w.accrue(t, t0.Add(11*time.Minute)) // the same window again
	if sum, n := w.appBooked(t, wl.ID); sum != 60 || n != 1 {
		t.Errorf("the window accrued again: %d in %d entries; want still 60 in 1", sum, n)
	}
	w.accrue(t, t0.Add(21*time.Minute)) // 1200 s at 360, not 720: 120
	if sum, _ := w.appBooked(t, wl.ID); sum != 120 {
		t.Errorf("after the price change: %d; want 120 (the rate it was run with)", sum)
	}
	acct, err := billing.AccountOf(ctx, w.pool, w.project, 0)
	if err != nil || acct.AppBurnMinorPerHour != 360 || acct.BurnRateMinorPerHour != 220*8+360 {
		t.Errorf("burn while it runs: %+v, %v; want 360 of app in %d", acct, err, 220*8+360)
	}
	// Budgets count it: spent today 616 of the allocation + 120 of the
	// app (both charged up to 21 m), burning 1760 + 360 an hour.
	at := t0.Add(21 * time.Minute)
	if err := w.tx(t, func(tx pgx.Tx) error {
		_, err := billing.SetBudget(ctx, tx, billing.Budget{ProjectID: w.project, Period: api.BudgetDay, AmountMinor: 100_000}, "test", at)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if bs, err := billing.Budgets(ctx, w.pool, w.project, at); err != nil || len(bs) != 1 || bs[0].SpentMinor != 616+120 ||
		bs[0].BurnMinorPerHour != 1760+360 {
		t.Errorf("budget: %+v, %v; want spent 736, burn 2120", bs, err)
	}

	// It exits at 26 m: its meter stops with its last window (1500 s: 150).
	ended := t0.Add(26 * time.Minute)
	statusID, typ, _ := w.currentTask(t, wl.ID)
	w.settleAt(t, statusID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerExited, ExitCode: 0,
		StartedAt: &started, FinishedAt: &ended}), ended.Add(time.Second))
	if sum, _ := w.appBooked(t, wl.ID); sum != 150 {
		t.Errorf("after its end: %d; want 150", sum)
	}
	w.accrue(t, t0.Add(31*time.Minute))
	if sum, _ := w.appBooked(t, wl.ID); sum != 150 {
		t.Errorf("accrued after its end: %d; want still 150", sum)
	}

	// A second run takes the new price; the allocation's release at 41 m
	// stops it after 10 minutes at 720: 120.
	second, err := w.run(t, w.bob, api.AppRunRequest{Image: "jup", AllocationID: w.allocID, Name: "second"})
	if err != nil || second.AppPricePerHourMinor != 720 {
		t.Fatalf("second run: %+v, %v; want 720", second, err)
	}
	from := t0.Add(31 * time.Minute)
	taskID, typ, _ = w.currentTask(t, second.ID)
	w.settleAt(t, taskID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: second.ID, State: api.ContainerRunning, StartedAt: &from}), from)
	if err := w.tx(t, func(tx pgx.Tx) error {
		_, err := billing.StopMeter(ctx, tx, w.allocID, t0.Add(41*time.Minute))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	w.accrue(t, t0.Add(51*time.Minute))
	if sum, _ := w.appBooked(t, second.ID); sum != 120 {
		t.Errorf("second workload after the release: %d; want 120 (10 minutes at 720, none after the release)", sum)
	}
	if acct, _ := billing.AccountOf(ctx, w.pool, w.project, 0); acct.AppBurnMinorPerHour != 0 {
		t.Errorf("app burn after the release: %d; want 0", acct.AppBurnMinorPerHour)
	}
	charges, err := billing.AppCharges(ctx, w.pool, []string{wl.ID, second.ID})
	if err != nil || charges[wl.ID].AmountMinor != 150 || charges[wl.ID].Seconds != 1500 || charges[second.ID].AmountMinor != 120 {
		t.Errorf("app charges: %+v, %v", charges, err)
	}

	// A project's own app: no price of its own, refused one; no meter.
	w.priceApp(t, "notes", w.project, 0)
	err = w.tx(t, func(tx pgx.Tx) error {
		_, err := apps.SetPrice(ctx, tx, "notes", billing.DefaultCurrency, 100, t0)
		return err
	})
	if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "only platform apps") {
		t.Errorf("price of a project's app: %v; want refused, only platform apps", err)
	}
	if n := w.count(t, `SELECT count(*) FROM app_meters`); n != 2 {
		t.Errorf("%d app meters; want 2 (the priced workloads')", n)
	}
}
