package billing_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/store"
)

// cost is the documented rounding rule: ⌊price × gpus × seconds / 3600⌋.
func cost(price, gpus, seconds int64) int64 { return price * gpus * seconds / 3600 }

func accrue(t testing.TB, pool *pgxpool.Pool, upTo time.Time) billing.AccrualResult {
	t.Helper()
	var r billing.AccrualResult
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) (err error) {
		r, err = billing.Accrue(context.Background(), tx, upTo, upTo)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func stop(t testing.TB, pool *pgxpool.Pool, alloc string, at time.Time) billing.Usage {
	t.Helper()
	var u billing.Usage
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) (err error) {
		u, err = billing.StopMeter(context.Background(), tx, alloc, at)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// usageBooked is minus the sum of an allocation's usage ledger entries.
func usageBooked(t testing.TB, q billing.Querier, alloc string) int64 {
	t.Helper()
	var s int64
	if err := q.QueryRow(context.Background(), `SELECT coalesce(-sum(amount_minor), 0)::bigint FROM ledger_entries
		WHERE kind = 'usage' AND reference LIKE 'usage:' || $1 || ':%'`, alloc).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAccrualRoundingNeverDrifts is acceptance 3's arithmetic: whatever
// the window, retries and the final partial window, an allocation's usage
// entries add up to price × GPUs × active seconds, rounded down once.
func TestAccrualRoundingNeverDrifts(t *testing.T) {
	f := newFixture(t)
	base := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		sku    string
		price  int64
		gpus   int
		window time.Duration
		offset time.Duration // when in a window it became active
		active time.Duration // how long it stayed active
	}{
		{"1 GPU, 10 s windows, sub-cent windows", "h200-slice", 350, 1, 10 * time.Second, 3700 * time.Millisecond, 17*time.Minute + 3*time.Second + 999*time.Millisecond},
		{"8 GPUs, 60 s windows", "h100-baremetal", 220, 8, time.Minute, 59 * time.Second, 2*time.Hour + 7*time.Second},
		{"2 GPUs, 7 s windows", "h100-slice", 250, 2, 7 * time.Second, 0, 5*time.Minute + 500*time.Millisecond},
		{"shorter than a window", "h200-slice", 350, 4, time.Minute, 10 * time.Second, 20 * time.Second},
		{"less than a second", "h200-slice", 350, 1, time.Minute, 10 * time.Second, 400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.project(t)
			start := base.Add(tc.offset)
			end := start.Add(tc.active)
			a := f.activeAllocation(t, p, tc.sku, tc.gpus, start)
			for b := billing.WindowEnd(start, tc.window).Add(tc.window); b.Before(end); b = b.Add(tc.window) {
				accrue(t, f.app, b)
				accrue(t, f.app, b) // a retry of the same window charges nothing more
			}
			u := stop(t, f.app, a, end)
			accrue(t, f.app, end.Add(time.Hour)) // a stopped meter is never charged again
			seconds := int64(tc.active / time.Second)
			want := cost(tc.price, int64(tc.gpus), seconds)
			if u.Seconds != seconds || u.AmountMinor != want || u.StoppedAt == nil || !u.StoppedAt.Equal(end) {
				t.Errorf("usage %+v; want %d s for %d, stopped at %v", u, seconds, want, end)
			}
			if got := usageBooked(t, f.app, a); got != want {
				t.Errorf("usage entries add up to %d; want %d", got, want)
			}
			if bal, _ := billing.Balance(context.Background(), f.app, p); bal != -want {
				t.Errorf("balance %d; want %d", bal, -want)
			}
			w, _, err := billing.AllocationWindows(context.Background(), f.app, a)
			if err != nil {
				t.Fatal(err)
			}
			var sum, secs int64
			for i, win := range w.Windows {
				sum += win.AmountMinor
				secs += win.Seconds
				if i > 0 && !win.Start.Equal(w.Windows[i-1].End) {
					t.Errorf("window %d starts at %v, not where the last ended (%v)", i, win.Start, w.Windows[i-1].End)
				}
			}
			if sum != want || secs != seconds {
				t.Errorf("windows add up to %d for %d s; want %d for %d s", sum, secs, want, seconds)
			}
		})
	}
	mustVerify(t, f.app)
}

// TestAccrualRandomWindowsProperty charges random allocations at random
// boundaries and checks the invariant for each.
func TestAccrualRandomWindowsProperty(t *testing.T) {
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(1, 2))
	p := f.project(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type run struct {
		id         string
		start, end time.Time
		gpus       int64
	}
	var runs []run
	for range 20 {
		gpus := []int64{1, 2, 4, 8}[rng.IntN(4)]
		start := base.Add(time.Duration(rng.Int64N(int64(time.Hour))))
		end := start.Add(time.Duration(rng.Int64N(int64(3 * time.Hour))))
		runs = append(runs, run{f.activeAllocation(t, p, "h200-slice", int(gpus), start), start, end, gpus})
	}
	// Accrual at irregular times, as a loop that is sometimes late would.
	for at := base; at.Before(base.Add(5 * time.Hour)); at = at.Add(time.Duration(rng.Int64N(int64(10 * time.Minute)))) {
		// Releases stop meters as they happen, before any later accrual.
		for _, r := range runs {
			if !r.end.After(at) {
				stop(t, f.app, r.id, r.end)
			}
		}
		accrue(t, f.app, at.Truncate(time.Second))
	}
	var total int64
	for _, r := range runs {
		stop(t, f.app, r.id, r.end) // no-op if stopped
		want := cost(350, r.gpus, int64(r.end.Sub(r.start)/time.Second))
		if got := usageBooked(t, f.app, r.id); got != want {
			t.Errorf("allocation active %v on %d GPUs: charged %d; want %d", r.end.Sub(r.start), r.gpus, got, want)
		}
		total += want
	}
	if bal, _ := billing.Balance(context.Background(), f.app, p); bal != -total {
		t.Errorf("balance %d; want %d", bal, -total)
	}
	mustVerify(t, f.app)
}

// TestAccrualTwoReplicasChargeOnce is acceptance 3's concurrency: several
// accrual runs for the same window, from separate pools (separate
// "controlds"), at once, with and without the advisory lock, charge each
// window once.
func TestAccrualTwoReplicasChargeOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	start := time.Date(2026, 2, 2, 8, 0, 0, 0, time.UTC)
	var allocs []string
	for range 50 {
		allocs = append(allocs, f.activeAllocation(t, p, "h100-slice", 2, start))
	}
	replicas := make([]*pgxpool.Pool, 2)
	for i := range replicas {
		pool, err := store.OpenAs(ctx, f.dsn, 8, store.AppRole)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		replicas[i] = pool
	}
	// Round 1: bare Accrue, four at once per replica, no lock at all.
	boundary := start.Add(10 * time.Minute)
	var wg sync.WaitGroup
	for _, pool := range replicas {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := billing.Accrue(ctx, tx, boundary, boundary)
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	// Round 2: two Runners (the locked tick controld runs), at once.
	clock := boundary.Add(10*time.Minute + 30*time.Second)
	var runners []*billing.Runner
	for _, pool := range replicas {
		r, err := billing.NewRunner(billing.Config{Pool: pool, Now: func() time.Time { return clock },
			Settings: billing.Settings{Window: time.Minute, LowBalanceThresholdMinor: 1, Grace: time.Hour},
			Release:  func(context.Context, string) (int, error) { return 0, nil }})
		if err != nil {
			t.Fatal(err)
		}
		runners = append(runners, r)
	}
	results := make([]billing.TickResult, len(runners))
	for i, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if results[i], err = r.Tick(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var windows int64
	for _, r := range results {
		windows += r.Accrual.Windows
	}
	if windows != int64(len(allocs)) {
		t.Errorf("the two runners charged %d windows; want %d (results %+v)", windows, len(allocs), results)
	}
	want := cost(250, 2, 20*60) // both rounds: 20 minutes
	for _, a := range allocs {
		if got := usageBooked(t, f.app, a); got != want {
			t.Errorf("allocation %s charged %d; want %d", a, got, want)
		}
		var n int
		if err := f.app.QueryRow(ctx, `SELECT count(*) FROM usage_charges WHERE allocation_id=$1`, a).Scan(&n); err != nil || n != 2 {
			t.Errorf("allocation %s has %d windows (%v); want 2", a, n, err)
		}
	}
	if bal, _ := billing.Balance(ctx, f.app, p); bal != -want*int64(len(allocs)) {
		t.Errorf("balance %d; want %d", bal, -want*int64(len(allocs)))
	}
	mustVerify(t, f.app)
}

// TestStopMeterRacesAccrual stops meters while accruals run: every
// allocation ends up charged exactly for its active time.
func TestStopMeterRacesAccrual(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	start := time.Date(2026, 2, 2, 8, 0, 0, 0, time.UTC)
	end := start.Add(30*time.Minute + 17*time.Second)
	var allocs []string
	for range 30 {
		allocs = append(allocs, f.activeAllocation(t, p, "h200-slice", 1, start))
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 5 {
				b := start.Add(time.Duration(i*5+k+1) * time.Minute)
				if err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
					_, err := billing.Accrue(ctx, tx, b, b)
					return err
				}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for _, a := range allocs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
				_, err := billing.StopMeter(ctx, tx, a, end)
				return err
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, a := range allocs {
		if got, want := usageBooked(t, f.app, a), cost(350, 1, int64(end.Sub(start)/time.Second)); got != want {
			t.Errorf("allocation %s charged %d; want %d", a, got, want)
		}
	}
	mustVerify(t, f.app)
}
