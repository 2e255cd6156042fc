package billing_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("billing", store.Migrate)

// fixture is a test database seen two ways: owner is the login role that
// owns the schema (a superuser here), app acts as store.AppRole the way
// controld does. It holds one user and the default catalog.
type fixture struct {
	owner  *pgxpool.Pool
	app    *pgxpool.Pool
	dsn    string
	userID string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	dsn := testutil.Postgres(t, pgTemplate)
	owner, err := store.Open(ctx, dsn, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	app, err := store.OpenAs(ctx, dsn, 16, store.AppRole)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	f := &fixture{owner: owner, app: app, dsn: dsn, userID: ids.New(ids.User)}
	storetest.User(t, owner, f.userID, f.userID+"@example.test", time.Now())
	if err := catalog.Seed(ctx, owner, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	return f
}

// project creates a project whose only member (owner) is the fixture's user.
func (f *fixture) project(t testing.TB) string {
	t.Helper()
	id := ids.New(ids.Project)
	now := time.Now()
	storetest.Project(t, f.owner, id, id, f.userID, now)
	storetest.Member(t, f.owner, id, f.userID, api.ProjectOwner, now)
	return id
}

// appendEntry books e in its own transaction on pool.
func appendEntry(t testing.TB, pool *pgxpool.Pool, e billing.Entry) (billing.Entry, bool) {
	t.Helper()
	var stored billing.Entry
	var inserted bool
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) (err error) {
		stored, inserted, err = billing.Append(context.Background(), tx, e)
		return err
	})
	if err != nil {
		t.Fatalf("append %+v: %v", e, err)
	}
	return stored, inserted
}

var refSeq int

// credit is a valid adjustment of amount to project at.
func credit(project string, amount int64, at time.Time) billing.Entry {
	refSeq++
	return billing.Entry{ProjectID: project, Kind: billing.KindAdjustment, Reference: fmt.Sprintf("test-%d", refSeq),
		AmountMinor: amount, Memo: "test credit", ActorID: "test", CreatedAt: at}
}

// mustVerify runs Verify and fails unless every account is sound.
func mustVerify(t testing.TB, pool *pgxpool.Pool) []billing.AccountCheck {
	t.Helper()
	checks, err := billing.Verify(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.OK() {
			t.Errorf("account %s: %v", c.ProjectID, c.Problems)
		}
	}
	return checks
}

// activeAllocation inserts an active allocation of gpus GPUs of sku in
// project and starts its meter at since.
func (f *fixture) activeAllocation(t testing.TB, project, sku string, gpus int, since time.Time) string {
	t.Helper()
	ctx := context.Background()
	id := ids.New(ids.Allocation)
	err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
		s, err := catalog.Get(ctx, tx, sku)
		if err != nil {
			return err
		}
		storetest.Allocation(t, tx, api.Allocation{ID: id, ProjectID: project, UserID: f.userID, SKU: s.ID, Shape: s.Shape,
			GPUs: gpus, State: api.AllocActive, CreatedAt: since, UpdatedAt: since})
		price, currency, err := catalog.Price(ctx, tx, sku)
		if err != nil {
			return err
		}
		return billing.StartMeter(ctx, tx, billing.Meter{AllocationID: id, ProjectID: project, SKU: sku, GPUs: gpus,
			PricePerGPUHourMinor: price, Currency: currency}, since)
	})
	if err != nil {
		t.Fatalf("active allocation: %v", err)
	}
	return id
}
