package workloads_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/internal/api"
)

// meteredAllocation is a new active allocation of bob's whose meter runs
// from t0.
func (w *world) meteredAllocation(t *testing.T) string {
	t.Helper()
	id := w.allocation(t, api.AllocActive, api.ShapeBaremetal)
	if err := w.tx(t, func(tx pgx.Tx) error {
		return billing.StartMeter(context.Background(), tx, billing.Meter{AllocationID: id, ProjectID: w.project,
			UserID: w.bob.UserID, SKU: "h100-baremetal", GPUs: 8, PricePerGPUHourMinor: 220, Currency: billing.DefaultCurrency}, t0)
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (w *world) appMeter(workloadID, allocID string) billing.AppMeter {
	return billing.AppMeter{WorkloadID: workloadID, AllocationID: allocID, ProjectID: w.project, UserID: w.bob.UserID,
		AppID: "app-test", PricePerHourMinor: 360, Currency: billing.DefaultCurrency}
}

// blockedOrDone waits until the backend pid waits on a lock (true) or
// done is closed (false).
func (w *world) blockedOrDone(t *testing.T, pid uint32, done <-chan struct{}) bool {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case <-done:
			return false
		default:
		}
		var waiting bool
		if err := w.pool.QueryRow(context.Background(), `SELECT coalesce(wait_event_type = 'Lock', false)
			FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return true
		}
	}
	t.Fatal("neither blocked nor done after 30 s")
	return false
}

// TestAppMeterStartWaitsForARelease (billing.StartAppMeter): a workload's
// app meter starting while its allocation's release is in flight waits
// for the release and, once it committed, starts nothing — no app meter
// runs on a released allocation.
func TestAppMeterStartWaitsForARelease(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	allocID := w.meteredAllocation(t)
	release, err := w.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = release.Rollback(ctx) }()
	if _, err := billing.StopMeter(ctx, release, allocID, t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()
	done := make(chan struct{})
	var startErr error
	go func() {
		defer close(done)
		startErr = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return billing.StartAppMeter(ctx, tx, w.appMeter("w-start", allocID), t0.Add(5*time.Minute))
		})
	}()
	blocked := w.blockedOrDone(t, pid, done)
	if err := release.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if startErr != nil {
		t.Fatal(startErr)
	}
	if !blocked {
		t.Error("the app meter's start did not wait for the release in flight")
	}
	if n := w.count(t, `SELECT count(*) FROM app_meters WHERE allocation_id = $1 AND stopped_at IS NULL`, allocID); n != 0 {
		t.Errorf("%d app meters running on the released allocation; want 0", n)
	}
}

// TestReleaseAndAppMeterStopDoNotDeadlock (billing.StopMeter,
// billing.StopAppMeter): a release and a priced workload's end, at the
// same time, take their locks in the same order (app meter, then the
// account): whichever waits, neither fails with a deadlock. First with
// the workload's end holding its meter while the release books, then
// many times at once.
func TestReleaseAndAppMeterStopDoNotDeadlock(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	release := func(allocID string) error {
		return w.tx(t, func(tx pgx.Tx) error {
			_, err := billing.StopMeter(ctx, tx, allocID, t0.Add(30*time.Minute))
			return err
		})
	}
	end := func(tx pgx.Tx, workloadID string) error {
		return billing.StopAppMeter(ctx, tx, workloadID, t0.Add(20*time.Minute), t0.Add(30*time.Minute))
	}
	startApp := func(workloadID, allocID string) {
		t.Helper()
		if err := w.tx(t, func(tx pgx.Tx) error {
			return billing.StartAppMeter(ctx, tx, w.appMeter(workloadID, allocID), t0)
		}); err != nil {
			t.Fatal(err)
		}
	}

	// The end holds the app meter; the release starts and must wait
	// before it books anything; then the end books and commits.
	allocID := w.meteredAllocation(t)
	startApp("w-held", allocID)
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	endTx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = endTx.Rollback(ctx) }()
	if _, err := endTx.Exec(ctx, `SELECT 1 FROM app_meters WHERE workload_id = 'w-held' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	relConn, err := w.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := relConn.Conn().PgConn().PID()
	done := make(chan struct{})
	var relErr error
	go func() {
		defer close(done)
		defer relConn.Release()
		relErr = pgx.BeginFunc(ctx, relConn, func(tx pgx.Tx) error {
			_, err := billing.StopMeter(ctx, tx, allocID, t0.Add(30*time.Minute))
			return err
		})
	}()
	w.blockedOrDone(t, pid, done)
	endErr := end(endTx, "w-held")
	if endErr == nil {
		endErr = endTx.Commit(ctx)
	}
	<-done
	for what, err := range map[string]error{"release": relErr, "end": endErr} {
		if err != nil {
			t.Errorf("%s while the other runs: %v; want no deadlock", what, err)
		}
	}

	// Many at once.
	const rounds = 20
	for i := range rounds {
		allocID := w.meteredAllocation(t)
		wid := fmt.Sprintf("w-race-%d", i)
		startApp(wid, allocID)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Add(2)
		go func() { defer wg.Done(); errs[0] = release(allocID) }()
		go func() { defer wg.Done(); errs[1] = w.tx(t, func(tx pgx.Tx) error { return end(tx, wid) }) }()
		wg.Wait()
		for _, err := range errs {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "40P01" {
				t.Fatalf("round %d: deadlock: %v", i, err)
			}
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	}
}

// TestAppFinalChargeDatedNow (billing.StopAppMeter): a workload's last app
// window, ended by a report that came late, is charged up to the reported
// end but dated when it is booked, so it counts in the budget period it
// was charged in.
func TestAppFinalChargeDatedNow(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	allocID := w.meteredAllocation(t)
	ended, now := t0.Add(10*time.Minute), t0.Add(26*time.Hour)
	if err := w.tx(t, func(tx pgx.Tx) error {
		if err := billing.StartAppMeter(ctx, tx, w.appMeter("w-late", allocID), t0); err != nil {
			return err
		}
		return billing.StopAppMeter(ctx, tx, "w-late", ended, now)
	}); err != nil {
		t.Fatal(err)
	}
	var windowEnd, charged, booked time.Time
	var amount int64
	if err := w.pool.QueryRow(ctx, `SELECT c.window_end, c.created_at, c.amount_minor, l.created_at FROM app_charges c
		JOIN ledger_entries l ON l.kind = 'app' AND l.reference LIKE 'app:' || c.workload_id || ':%'
		WHERE c.workload_id = 'w-late'`).Scan(&windowEnd, &charged, &amount, &booked); err != nil {
		t.Fatal(err)
	}
	if !windowEnd.Equal(ended) || amount != 60 {
		t.Errorf("last window to %s for %d; want to %s for 60 (600 s at 360/h)", windowEnd, amount, ended)
	}
	if !charged.Equal(now) || !booked.Equal(now) {
		t.Errorf("charge dated %s, ledger entry %s; want both %s (when booked)", charged, booked, now)
	}
}

// TestFaultCreditReturnsAppCharges (billing.CreditFault,
// docs/decisions/0059-app-prices.md): a GPU fault's credit gives back the
// app charges of the allocation's workloads in the windows after the
// fault with the allocation's own.
func TestFaultCreditReturnsAppCharges(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	allocID := w.meteredAllocation(t)
	if err := w.tx(t, func(tx pgx.Tx) error {
		return billing.StartAppMeter(ctx, tx, w.appMeter("w-fault", allocID), t0)
	}); err != nil {
		t.Fatal(err)
	}
	w.accrue(t, t0.Add(20*time.Minute)) // app: 1200 s at 360/h = 120
	var c billing.FaultCredit
	if err := w.tx(t, func(tx pgx.Tx) error {
		var err error
		c, err = billing.CreditFault(ctx, tx, allocID, t0.Add(5*time.Minute), t0.Add(25*time.Minute), "gpu fault")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Stopped at 25 m: the allocation 1500 s at 1760/h = 733, the app
	// 1500 s at 360/h = 150; every window ends after the fault.
	var usage, app int64
	if err := w.pool.QueryRow(ctx, `SELECT (SELECT sum(amount_minor) FROM usage_charges WHERE allocation_id = $1),
		(SELECT sum(amount_minor) FROM app_charges WHERE allocation_id = $1)`, allocID).Scan(&usage, &app); err != nil {
		t.Fatal(err)
	}
	if usage != 733 || app != 150 {
		t.Fatalf("charged %d + %d of app; want 733 + 150", usage, app)
	}
	if !c.Booked || c.Entry.AmountMinor != 733+150 || c.Windows != 4 {
		t.Errorf("credit: %+v; want 883 (the allocation's 733 and the app's 150) over 4 windows", c)
	}
}

// TestAppMeterKeyAndChargesChecked (migration 0045): an app meter's key
// never changes, and a statement inserting an app charge that names no
// meter is refused (checked once per statement, as usage charges are).
func TestAppMeterKeyAndChargesChecked(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	allocID := w.meteredAllocation(t)
	if err := w.tx(t, func(tx pgx.Tx) error {
		return billing.StartAppMeter(ctx, tx, w.appMeter("w-key", allocID), t0)
	}); err != nil {
		t.Fatal(err)
	}
	code := func(err error) string {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return pe.Code
		}
		return ""
	}
	_, err := w.pool.Exec(ctx, `UPDATE app_meters SET workload_id = 'w-moved' WHERE workload_id = 'w-key'`)
	if code(err) != "23001" {
		t.Errorf("change of an app meter's key: %v; want restrict_violation", err)
	}
	_, err = w.pool.Exec(ctx, `INSERT INTO app_charges (workload_id, allocation_id, project_id, currency, window_start,
		window_end, start_seconds, end_seconds, amount_minor, created_at)
		VALUES ('w-key', $1, $2, 'usd', $3, $4, 0, 60, 6, $4), ('w-none', $1, $2, 'usd', $3, $4, 0, 60, 6, $4)`,
		allocID, w.project, t0, t0.Add(time.Minute))
	if code(err) != "23503" {
		t.Errorf("charges naming no meter: %v; want foreign_key_violation", err)
	}
	if n := w.count(t, `SELECT count(*) FROM app_charges WHERE allocation_id = $1`, allocID); n != 0 {
		t.Errorf("%d app charges after the refused statement; want 0", n)
	}
}
