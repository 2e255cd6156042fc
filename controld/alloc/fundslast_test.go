package alloc

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// addSlots adds ready gpu_slice H200 nodes with count free slots in all,
// at most four a node.
func (f *fixture) addSlots(t *testing.T, count int) {
	t.Helper()
	ctx := t.Context()
	for n := 0; count > 0; n++ {
		k := min(count, 4)
		count -= k
		id := fmt.Sprintf("n-%d", n)
		if _, err := f.pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
			VALUES ($1, $1, 'gpu_slice', 'H200', 'ready', now(), now())`, id); err != nil {
			t.Fatal(err)
		}
		if _, err := f.pool.Exec(ctx, `INSERT INTO slots (id, node_id, idx, gpu_pci, numa_node, state)
			SELECT $1 || '-sl-' || i, $1, i, format('0000:%s:00.0', to_hex(24 + 16 * i)), i / 2, 'free'
			FROM generate_series(0, $2 - 1) i`, id, k); err != nil {
			t.Fatal(err)
		}
	}
}

// credit books amount to the fixture's project.
func (f *fixture) credit(t *testing.T, amount int64) {
	t.Helper()
	err := pgx.BeginFunc(t.Context(), f.pool, func(tx pgx.Tx) error {
		_, _, err := billing.Append(t.Context(), tx, billing.Entry{ProjectID: f.project, Kind: billing.KindAdjustment,
			Reference: ids.New("test"), AmountMinor: amount, Memo: "test credit", ActorID: f.userID, CreatedAt: time.Now().UTC()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// create runs one alloc.create as controld does: Create under
// mutate.Runner, with a key of its own.
func (f *fixture) create(ctx context.Context, pool *pgxpool.Pool, req api.AllocCreateRequest, rules Rules) error {
	runner := &mutate.Runner{Pool: pool, Now: time.Now}
	req.Project = f.project
	_, err := runner.Run(ctx, mutate.Request{Endpoint: api.EndpointAllocCreate, ActorID: f.userID, Key: ids.New("key"),
		Fingerprint: []byte(req.SKU)}, func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return Create(ctx, tx, Actor{UserID: f.userID, Role: api.RoleUser}, req, rules, time.Now().UTC())
	})
	return err
}

// TestCreateTakesTheFundsLockInItsLastRoundTrip: the project's funds
// lock is taken in the create's final round trip — first, then the funds
// check as one statement and its guard, then the audit (whose chain locks
// the project's stream: funds before audit, as every other taker of the
// funds lock), outbox and idempotency rows and, for a creator bound by no
// budget, the COMMIT — and nowhere before, so no round trip to the client
// falls between the lock and the COMMIT
// (docs/decisions/0067-create-lock-order.md). Before, the COMMIT was a
// round trip of its own (0042), and before that the lock was taken
// before placing and held across some ten round trips. With a budget
// binding the creator, the budgets are read in that round trip too and
// the COMMIT follows in its own, once they are checked.
func TestCreateTakesTheFundsLockInItsLastRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.addSlots(t, 8)
	var log tripLog
	pool := f.tracedPool(t, &log)
	lockedIn := func() []int {
		var locked []int
		for i, trip := range log.trips {
			for _, sql := range trip {
				if strings.Contains(sql, "alloc.funds") {
					locked = append(locked, i)
				}
			}
		}
		return locked
	}
	inOrder := func(trip []string, want ...string) bool {
		at := 0
		for _, sql := range trip {
			if at < len(want) && strings.Contains(sql, want[at]) {
				at++
			}
		}
		return at == len(want) && strings.Contains(trip[0], "alloc.funds")
	}
	// Rules{}: no minimum runway, so the empty balance is enough.
	if err := f.create(t.Context(), pool, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, Rules{}); err != nil {
		t.Fatal(err)
	}
	n, locked := len(log.trips), lockedIn()
	if len(locked) != 1 || locked[0] != n-1 {
		t.Fatalf("the funds lock in round trips %v of %d; want it once, in the last", locked, n)
	}
	if last := log.trips[n-1]; !inOrder(last, "alloc.funds", "gpuaas.funds_short", "current_setting('gpuaas.funds_short')",
		"INSERT INTO audit_logs", "INSERT INTO outbox",
		"INSERT INTO idempotency_keys", "COMMIT") || !strings.EqualFold(last[len(last)-1], "commit") {
		t.Errorf("the last round trip: %q; want the lock, the check, its guard, the audit, outbox and idempotency rows "+
			"and COMMIT, in that order", last)
	}
	if check := log.trips[n-1][1]; !strings.Contains(check, "a.id <> $2") || !strings.Contains(check, "ledger_entries") {
		t.Errorf("the funds check %q does not read the other provisioning allocations and the ledger in one statement", check)
	}
	t.Logf("create without budgets: %d round trips in all (BEGIN and COMMIT included)", n)

	err := pgx.BeginFunc(t.Context(), f.pool, func(tx pgx.Tx) error {
		_, err := billing.SetBudget(t.Context(), tx, billing.Budget{ProjectID: f.project, BurnCapMinorPerHour: 100_000},
			f.userID, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	log.trips = nil
	log.mu.Unlock()
	if err := f.create(t.Context(), pool, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, Rules{}); err != nil {
		t.Fatal(err)
	}
	n, locked = len(log.trips), lockedIn()
	// After it, the budget check's own reads (the spend, the scope's
	// provisioning burn), then COMMIT on its own.
	if len(locked) != 1 || locked[0] >= n-1 || !strings.EqualFold(strings.TrimSpace(log.trips[n-1][0]), "commit") {
		t.Fatalf("with a budget, the funds lock in round trips %v of %d (the last %q); want it once, before a COMMIT of its own",
			locked, n, log.trips[n-1])
	}
	if last := log.trips[locked[0]]; !inOrder(last, "alloc.funds", "gpuaas.funds_short", "current_setting('gpuaas.funds_short')",
		"budget", "INSERT INTO audit_logs", "INSERT INTO outbox", "INSERT INTO idempotency_keys") {
		t.Errorf("with a budget, the round trip of the lock: %q; want the lock, the check, its guard, the budgets, "+
			"the audit, outbox and idempotency rows, in that order", last)
	}
	t.Logf("create with a budget: %d round trips in all", n)
}

// TestCreateRefusedByTheGuardSaysWhatItRead: a create with capacity and
// too little money is refused in its final round trip by the database's
// verdict (fundsGuardSQL), with the numbers the check read under the
// lock — the running allocation and the new one — and leaves nothing
// behind; the same create succeeds once the balance covers both.
func TestCreateRefusedByTheGuardSaysWhatItRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	f.addSlots(t, 4)
	rules := Rules{MinRunway: 10 * time.Minute}
	req := api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}
	f.credit(t, 59) // $3.50/h for 10 minutes: one allocation, not two
	if err := f.create(ctx, f.pool, req, rules); err != nil {
		t.Fatal(err)
	}
	err := f.create(ctx, f.pool, req, rules)
	var short *InsufficientFundsError
	if !errors.As(err, &short) {
		t.Fatalf("second create: got %v; want *InsufficientFundsError", err)
	}
	want := Funds{ProjectID: f.project, BalanceMinor: 59, RunningMinorPerHour: 350, NewMinorPerHour: 350,
		BurnMinorPerHour: 700, RunwaySeconds: 303, MinRunway: rules.MinRunway, NeededMinor: 117}
	if got := short.Funds; !reflect.DeepEqual(got, want) {
		t.Errorf("refusal's funds: got %+v; want %+v", got, want)
	}
	var allocs, keys int
	if err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM allocations), (SELECT count(*) FROM idempotency_keys)`).
		Scan(&allocs, &keys); err != nil || allocs != 1 || keys != 1 {
		t.Fatalf("after the refusal: %d allocations, %d keys (%v); want the first create's only", allocs, keys, err)
	}
	f.credit(t, 117-59)
	if err := f.create(ctx, f.pool, req, rules); err != nil {
		t.Fatalf("with the balance covering both: %v", err)
	}
}

// TestCreateRefusesForFundsBeforeCapacity: with the funds checked last,
// a create refused for capacity is still refused with insufficient_funds
// when the balance falls short too, as when the funds were checked before
// placing; with the balance enough, no_capacity. Nothing is left behind.
func TestCreateRefusesForFundsBeforeCapacity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	rules := Rules{MinRunway: 10 * time.Minute}
	req := api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}
	if err := f.create(ctx, f.pool, req, rules); api.CodeOf(err) != api.CodeInsufficientFunds {
		t.Fatalf("no capacity, no money: got %v; want insufficient_funds", err)
	}
	f.credit(t, 59) // $3.50/h for 10 minutes: 58.33, rounded up
	if err := f.create(ctx, f.pool, req, rules); api.CodeOf(err) != api.CodeNoCapacity {
		t.Fatalf("no capacity, money enough: got %v; want no_capacity", err)
	}
	var rows int
	if err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM allocations) + (SELECT count(*) FROM idempotency_keys)`).
		Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("allocations and idempotency keys left behind: %d (%v); want none", rows, err)
	}
}

// TestFundsCheckReadsOnlyProvisioningAllocations: the sum the funds check
// runs under the lock reads the project's provisioning allocations through
// allocations_provisioning_idx (migration 0040), not its whole history
// through allocations_project_idx: with 3,000 released allocations and one
// provisioning, the plan is an index scan of the partial index.
func TestFundsCheckReadsOnlyProvisioningAllocations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.pool.Exec(ctx, `INSERT INTO allocations (id, project_id, user_id, sku_id, shape, gpus, state, version, queued,
		created_at, updated_at) SELECT 'a-old-' || g, $1, $2, 'h200-slice', 'gpu_slice', 1, 'released', 3, false, now(), now()
		FROM generate_series(1, 3000) g`, f.project, f.userID); err != nil {
		t.Fatal(err)
	}
	a := f.insertAlloc(t, api.AllocProvisioning, 2, false)
	if _, err := f.pool.Exec(ctx, `ANALYZE allocations`); err != nil {
		t.Fatal(err)
	}
	rows, err := f.pool.Query(ctx, `EXPLAIN `+othersProvisioningSQL, f.project, "a-new")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "allocations_provisioning_idx") {
		t.Errorf("the funds check's sum does not use allocations_provisioning_idx:\n%s", plan)
	}
	var burn int64
	if err := f.pool.QueryRow(ctx, othersProvisioningSQL, f.project, "a-new").Scan(&burn); err != nil || burn != 350 {
		t.Errorf("provisioning burn besides a new one: %d (%v); want 350 (%s alone)", burn, err, a.ID)
	}
}
