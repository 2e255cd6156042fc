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
	if _, err := owner.Exec(ctx, `INSERT INTO users (id, email, role, provider, password_hash, created_at)
		VALUES ($1, $2, 'user', 'local', 'x', $3)`, f.userID, f.userID+"@example.test", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := catalog.Seed(ctx, owner, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	return f
}

// project creates a project whose only member (owner) is the fixture's user.
func (f *fixture) project(t testing.TB) string {
	t.Helper()
	id := ids.New(ids.Project)
	ctx := context.Background()
	if _, err := f.owner.Exec(ctx, `INSERT INTO projects (id, name, created_by, created_at) VALUES ($1, $1, $2, now())`,
		id, f.userID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.owner.Exec(ctx, `INSERT INTO project_members (project_id, user_id, role, added_at)
		VALUES ($1, $2, 'owner', now())`, id, f.userID); err != nil {
		t.Fatal(err)
	}
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
		if _, err := tx.Exec(ctx, `INSERT INTO allocations (id, project_id, user_id, sku_id, shape, gpus, state, created_at, updated_at)
			SELECT $1, $2, $3, id, shape, $4, 'active', $5, $5 FROM skus WHERE id = $6`,
			id, project, f.userID, gpus, since, sku); err != nil {
			return err
		}
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
