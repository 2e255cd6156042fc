package billing_test

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/ids"
)

const gib = int64(1) << 30

// volumeCost is the documented rounding rule of volumes:
// ⌊price per GiB-month × bytes × seconds / (2³⁰ × 730 × 3600)⌋.
func volumeCost(price, size, seconds int64) int64 {
	n := new(big.Int).Mul(big.NewInt(price), big.NewInt(size))
	n.Mul(n, big.NewInt(seconds))
	return n.Quo(n, big.NewInt(gib*730*3600)).Int64()
}

// volume inserts a ready volume of size bytes in project (on a node of
// its own) and starts its meter at price per GiB-month at since.
func (f *fixture) volume(t testing.TB, project string, size, price int64, since time.Time) string {
	t.Helper()
	ctx := context.Background()
	n, err := node.Register(ctx, f.owner, sim.BaremetalHost(ids.New("n"), "H100"), since)
	if err != nil {
		t.Fatal(err)
	}
	id := ids.New("vol")
	if _, err := f.owner.Exec(ctx, `INSERT INTO volumes (id, project_id, name, node_id, node_name, size_bytes, state,
		created_by, created_at, updated_at) VALUES ($1, $2, $1, $3, $4, $5, 'ready', $6, $7, $7)`,
		id, project, n.ID, n.Name, size, f.userID, since); err != nil {
		t.Fatal(err)
	}
	startVolume(t, f.app, billing.VolumeMeter{VolumeID: id, ProjectID: project, UserID: f.userID, SizeBytes: size,
		PricePerGiBMonthMinor: price, Currency: billing.DefaultCurrency}, since)
	return id
}

func startVolume(t testing.TB, pool *pgxpool.Pool, m billing.VolumeMeter, at time.Time) {
	t.Helper()
	if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		return billing.StartVolumeMeter(context.Background(), tx, m, at)
	}); err != nil {
		t.Fatal(err)
	}
}

func stopVolume(t testing.TB, pool *pgxpool.Pool, volumeID string, at time.Time) bool {
	t.Helper()
	var stopped bool
	if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) (err error) {
		stopped, err = billing.StopVolumeMeter(context.Background(), tx, volumeID, at)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return stopped
}

// storageBooked is minus the sum of a volume's storage ledger entries.
func storageBooked(t testing.TB, q billing.Querier, volumeID string) int64 {
	t.Helper()
	var s int64
	if err := q.QueryRow(context.Background(), `SELECT coalesce(-sum(amount_minor), 0)::bigint FROM ledger_entries
		WHERE kind = 'storage' AND reference LIKE 'storage:' || $1 || '.%' AND memo LIKE $1 || ':%'`, volumeID).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestVolumeRoundingNeverDrifts: whatever the window, retries and the
// final partial window, a volume's storage entries add up to its cost
// for the whole time, rounded down once.
func TestVolumeRoundingNeverDrifts(t *testing.T) {
	f := newFixture(t)
	base := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		size   int64
		price  int64
		window time.Duration
		offset time.Duration
		active time.Duration
	}{
		{"100 GiB at $0.10, 60 s windows", 100 * gib, 10, time.Minute, 17 * time.Second, 3*time.Hour + 5*time.Second},
		{"1 GiB at $0.07, sub-cent windows", gib, 7, 10 * time.Second, 3700 * time.Millisecond, 2*time.Hour + 999*time.Millisecond},
		{"16 TiB at $0.20 (bigint would overflow in a year)", 16 << 40, 20, 7 * time.Minute, 0, 30 * time.Hour},
		{"shorter than a window", 10 * gib, 10, time.Minute, 10 * time.Second, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.project(t)
			start := base.Add(tc.offset)
			end := start.Add(tc.active)
			v := f.volume(t, p, tc.size, tc.price, start)
			for b := billing.WindowEnd(start, tc.window).Add(tc.window); b.Before(end); b = b.Add(tc.window) {
				accrue(t, f.app, b)
				accrue(t, f.app, b) // a retry of the same window charges nothing more
			}
			if !stopVolume(t, f.app, v, end) {
				t.Fatal("StopVolumeMeter found no running meter")
			}
			if stopVolume(t, f.app, v, end.Add(time.Hour)) {
				t.Error("a second StopVolumeMeter stopped a meter again")
			}
			accrue(t, f.app, end.Add(time.Hour)) // a stopped meter is never charged again
			want := volumeCost(tc.price, tc.size, int64(tc.active/time.Second))
			if got := storageBooked(t, f.app, v); got != want {
				t.Errorf("storage entries add up to %d; want %d", got, want)
			}
			if bal, _ := billing.Balance(context.Background(), f.app, p); bal != -want {
				t.Errorf("balance %d; want %d", bal, -want)
			}
			us, err := billing.VolumeUsages(context.Background(), f.app, p, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(us) != 1 || us[0].AmountMinor != want || us[0].Running {
				t.Fatalf("usage %+v; want one stopped volume charged %d", us, want)
			}
			var secs int64
			for i, w := range us[0].Windows {
				secs += w.Seconds
				if i > 0 && !w.Start.Equal(us[0].Windows[i-1].End) {
					t.Errorf("window %d starts at %v, not where the last ended (%v)", i, w.Start, us[0].Windows[i-1].End)
				}
			}
			if len(us[0].Windows) < 100 && secs != int64(tc.active/time.Second) {
				t.Errorf("windows add up to %d s; want %d", secs, int64(tc.active/time.Second))
			}
		})
	}
	mustVerify(t, f.app)
}

// TestVolumeResizeChargesNewSizeFromResize: a grown volume is charged at
// its old size up to the resize and at the new one from then on.
func TestVolumeResizeChargesNewSizeFromResize(t *testing.T) {
	f := newFixture(t)
	p := f.project(t)
	start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	v := f.volume(t, p, 10*gib, 10, start)
	resize := start.Add(5*time.Hour + 13*time.Second)
	end := resize.Add(7 * time.Hour)
	for b := start.Add(time.Minute); b.Before(resize); b = b.Add(time.Minute) {
		accrue(t, f.app, b)
	}
	stopVolume(t, f.app, v, resize)
	startVolume(t, f.app, billing.VolumeMeter{VolumeID: v, ProjectID: p, UserID: f.userID, SizeBytes: 500 * gib,
		PricePerGiBMonthMinor: 10, Currency: billing.DefaultCurrency}, resize)
	for b := resize.Truncate(time.Minute).Add(time.Minute); b.Before(end); b = b.Add(time.Minute) {
		accrue(t, f.app, b)
	}
	stopVolume(t, f.app, v, end)
	want := volumeCost(10, 10*gib, int64(resize.Sub(start)/time.Second)) + volumeCost(10, 500*gib, int64(end.Sub(resize)/time.Second))
	if got := storageBooked(t, f.app, v); got != want {
		t.Errorf("charged %d; want %d (10 GiB then 500 GiB)", got, want)
	}
	us, err := billing.VolumeUsages(context.Background(), f.app, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || us[0].SizeBytes != 500*gib || us[0].AmountMinor != want {
		t.Fatalf("usage %+v; want 500 GiB charged %d", us, want)
	}
	// GiB-hours: 10 GiB × 5 h 13 s + 500 GiB × 7 h.
	wantGiBh := 10*resize.Sub(start).Hours() + 500*7
	if d := us[0].GiBHours - wantGiBh; d > 1e-6 || d < -1e-6 {
		t.Errorf("GiB-hours %f; want %f", us[0].GiBHours, wantGiBh)
	}
	mustVerify(t, f.app)
}

// TestVolumesAndAllocationsTwoReplicasChargeOnce: accruals at once from
// two pools, bare and through two Runners, over a project with both
// allocations and volumes, charge every window of each once and keep
// the chain; the allocations are charged exactly as without volumes.
func TestVolumesAndAllocationsTwoReplicasChargeOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	start := time.Date(2026, 2, 2, 8, 0, 0, 0, time.UTC)
	var allocs, vols []string
	for range 20 {
		allocs = append(allocs, f.activeAllocation(t, p, "h100-slice", 2, start))
		vols = append(vols, f.volume(t, p, 3000*gib, 10, start))
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
	boundary := start.Add(10 * time.Minute)
	var wg sync.WaitGroup
	for _, pool := range replicas {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := billing.Accrue(ctx, tx, boundary, boundary)
					return err
				}); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	clock := boundary.Add(10*time.Minute + 30*time.Second)
	results := make([]billing.TickResult, len(replicas))
	for i, pool := range replicas {
		r, err := billing.NewRunner(billing.Config{Pool: pool, Now: func() time.Time { return clock },
			Settings: billing.Settings{Window: time.Minute, LowBalanceThresholdMinor: 1, Grace: time.Hour},
			Release:  func(context.Context, string) (int, error) { return 0, nil }})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
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
	if windows != int64(len(allocs)+len(vols)) {
		t.Errorf("the two runners charged %d windows; want %d", windows, len(allocs)+len(vols))
	}
	wantAlloc := cost(250, 2, 20*60)
	for _, a := range allocs {
		if got := usageBooked(t, f.app, a); got != wantAlloc {
			t.Errorf("allocation %s charged %d; want %d", a, got, wantAlloc)
		}
	}
	wantVol := volumeCost(10, 3000*gib, 20*60)
	for _, v := range vols {
		if got := storageBooked(t, f.app, v); got != wantVol {
			t.Errorf("volume %s charged %d; want %d", v, got, wantVol)
		}
		var n int
		if err := f.app.QueryRow(ctx, `SELECT count(*) FROM volume_charges WHERE volume_id = $1`, v).Scan(&n); err != nil || n != 2 {
			t.Errorf("volume %s has %d windows (%v); want 2", v, n, err)
		}
	}
	if bal, _ := billing.Balance(ctx, f.app, p); bal != -(wantAlloc+wantVol)*20 {
		t.Errorf("balance %d; want %d", bal, -(wantAlloc+wantVol)*20)
	}
	mustVerify(t, f.app)
}

// TestStopVolumeMeterRacesAccrual stops volume meters while accruals run:
// every volume ends up charged exactly for its time.
func TestStopVolumeMeterRacesAccrual(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	start := time.Date(2026, 2, 2, 8, 0, 0, 0, time.UTC)
	end := start.Add(30*time.Minute + 17*time.Second)
	var vols []string
	for range 30 {
		vols = append(vols, f.volume(t, p, 2000*gib, 10, start))
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
	for _, v := range vols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
				_, err := billing.StopVolumeMeter(ctx, tx, v, end)
				return err
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	want := volumeCost(10, 2000*gib, int64(end.Sub(start)/time.Second))
	for _, v := range vols {
		if got := storageBooked(t, f.app, v); got != want {
			t.Errorf("volume %s charged %d; want %d", v, got, want)
		}
	}
	mustVerify(t, f.app)
}

// TestVolumeAccrualLooksUpLastWindowByIndex: each volume segment's last
// window is found through volume_charges' primary key, as the
// allocations' are (TestAccrualQuadraticLastWindowScan).
func TestVolumeAccrualLooksUpLastWindowByIndex(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for range 20 {
		f.volume(t, p, gib, 10, start)
	}
	if _, err := f.owner.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for w := 1; w <= 2; w++ {
		upTo := start.Add(time.Duration(w) * time.Minute)
		if err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
			r, err := billing.Accrue(ctx, tx, upTo, upTo)
			if err != nil {
				return err
			}
			if r.Windows != 20 {
				t.Errorf("window %d: %+v; want 20 windows", w, r)
			}
			var seq, idx int64
			if err := tx.QueryRow(ctx, `SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables
				WHERE relname = 'volume_charges'`).Scan(&seq, &idx); err != nil {
				return err
			}
			if seq != 0 || idx < 20 {
				t.Errorf("window %d: %d sequential and %d index scans of volume_charges; want 0 and one per meter (20)", w, seq, idx)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAccrualLagCountsVolumes: a running volume meter nobody charged
// makes the lag (the GpuaasAccrualLag alert's metric) grow like an
// allocation's would, and charging it brings the lag back under a window.
func TestAccrualLagCountsVolumes(t *testing.T) {
	f := newFixture(t)
	p := f.project(t)
	start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	f.volume(t, p, 10*gib, 10, start)
	now := start.Add(3 * time.Hour)
	lag, err := billing.AccrualLag(context.Background(), f.app, now)
	if err != nil {
		t.Fatal(err)
	}
	if lag != 3*time.Hour {
		t.Fatalf("lag with a volume never charged: %s; want 3h0m0s", lag)
	}
	accrue(t, f.app, now)
	if lag, err = billing.AccrualLag(context.Background(), f.app, now); err != nil {
		t.Fatal(err)
	}
	if lag > time.Minute {
		t.Errorf("lag after charging up to now: %s; want at most a window", lag)
	}
}
