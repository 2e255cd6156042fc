package lease_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/lease"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("lease", store.Migrate)

func open(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := store.OpenAs(context.Background(), dsn, 4, store.AppRole)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestLeaseExcludesUntilExpiry: a lease held by one replica cannot be
// taken before it expires; once it has, the taker gets a higher epoch and
// the old holder's token is refused (renewal and Check).
func TestLeaseExcludesUntilExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := open(t, testutil.Postgres(t, pgTemplate))
	const ttl = 300 * time.Millisecond
	a, ok, err := lease.TryAcquire(ctx, pool, "x", "a", ttl)
	if err != nil || !ok || a.Epoch != 1 {
		t.Fatalf("first acquire got %+v, %v, %v; want epoch 1", a, ok, err)
	}
	if _, ok, err := lease.TryAcquire(ctx, pool, "x", "b", ttl); err != nil || ok {
		t.Fatalf("acquire of a running lease got %v, %v; want refused", ok, err)
	}
	var b lease.Token
	testutil.EventuallyWithin(t, 10*time.Second, "the lease to expire and be taken", func() bool {
		b, ok, err = lease.TryAcquire(ctx, pool, "x", "b", time.Minute)
		return err == nil && ok
	})
	if b.Epoch != 2 {
		t.Fatalf("taker's epoch got %d; want 2", b.Epoch)
	}
	if ok, err := lease.Renew(ctx, pool, a, ttl); err != nil || ok {
		t.Fatalf("renewal of the lost lease got %v, %v; want refused", ok, err)
	}
	if err := lease.Check(ctx, pool, a); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("check of the lost lease got %v; want ErrLost", err)
	}
	if err := lease.Check(ctx, pool, b); err != nil {
		t.Fatalf("check of the held lease: %v", err)
	}
	if h, err := lease.Holder(ctx, pool, "x"); err != nil || h != "b" {
		t.Fatalf("holder got %q, %v; want b", h, err)
	}
}

// TestKeeperStopsBeforeTakeover: a holder silently cut off from Postgres
// (its renewals hang) stops acting — its context ends with ErrLost — before
// another replica can take the lease. Before, the relay held a session
// advisory lock that outlived the cut for as long as the server kept the
// dead session.
func TestKeeperStopsBeforeTakeover(t *testing.T) {
	t.Parallel()
	dsn := testutil.Postgres(t, pgTemplate)
	via, proxy := testutil.PostgresVia(t, dsn)
	const ttl = 900 * time.Millisecond
	cut := open(t, via)
	a := &lease.Keeper{Pool: cut, Holder: "a", TTL: ttl, Log: testutil.Logger(t)}
	b := &lease.Keeper{Pool: open(t, dsn), Holder: "b", TTL: ttl, Log: testutil.Logger(t)}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	aActive, aStopped := make(chan struct{}), make(chan time.Time, 1)
	aDone := make(chan error, 1)
	go func() {
		aDone <- a.Run(ctx, "singleton", func(ctx context.Context) error {
			close(aActive)
			<-ctx.Done()
			aStopped <- time.Now()
			return nil
		})
	}()
	<-aActive
	bActive := make(chan time.Time, 1)
	bDone := make(chan error, 1)
	go func() {
		bDone <- b.Run(ctx, "singleton", func(ctx context.Context) error {
			bActive <- time.Now()
			<-ctx.Done()
			return nil
		})
	}()
	proxy.SetCut(true)
	var stopped, started time.Time
	select {
	case stopped = <-aStopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the cut holder never stopped")
	}
	select {
	case started = <-bActive:
	case <-time.After(30 * time.Second):
		t.Fatal("the other replica never took the lease")
	}
	if !stopped.Before(started) {
		t.Fatalf("the cut holder stopped at %v, after the other took over at %v", stopped, started)
	}
	if err := <-aDone; !errors.Is(err, lease.ErrLost) {
		t.Fatalf("cut holder's Run got %v; want ErrLost", err)
	}
	t.Logf("holder stopped %v before the takeover", started.Sub(stopped))
	proxy.SetCut(false)
	cancel()
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
}

// TestKeeperReleasesOnStop: a holder that stops releases its lease, so
// another replica takes it at once rather than after its TTL.
func TestKeeperReleasesOnStop(t *testing.T) {
	t.Parallel()
	pool := open(t, testutil.Postgres(t, pgTemplate))
	k := &lease.Keeper{Pool: pool, Holder: "a", TTL: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	if err := k.Run(ctx, "s", func(ctx context.Context) error { cancel(); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := lease.TryAcquire(context.Background(), pool, "s", "b", time.Hour); err != nil || !ok {
		t.Fatalf("acquire after release got %v, %v; want taken", ok, err)
	}
}
