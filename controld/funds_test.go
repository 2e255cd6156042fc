package controld_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// wantInsufficientFunds checks a refusal: the catalog code, the hint
// saying where money comes from (controldtest has no payment provider: an
// administrator's credit), and the message naming the numbers.
func wantInsufficientFunds(t *testing.T, err error, what string, inMessage ...string) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeInsufficientFunds {
		t.Fatalf("%s: got %v; want insufficient_funds", what, err)
	}
	if !strings.Contains(e.Hint, "gpuaas admin credit") || strings.Contains(e.Hint, "gpuaas billing topup") {
		t.Errorf("%s: hint %q; want it to name `gpuaas admin credit`, top-ups being off", what, e.Hint)
	}
	for _, s := range inMessage {
		if !strings.Contains(e.Message, s) {
			t.Errorf("%s: message %q; want it to say %q", what, e.Message, s)
		}
	}
}

// TestAllocCreateRefusedWithoutFunds is a money check before renting: a project debited to
// $0 (`gpuaas admin credit --amount=-100`) could start 8 GPUs. Now the
// create is refused with insufficient_funds, queued or not, nothing is
// reserved, and the refusal is audited.
func TestAllocCreateRefusedWithoutFunds(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	if got := env.Credit(t, env.Project.Name, -100_00); got != 0 {
		t.Fatalf("balance after the debit: got %d; want 0", got)
	}
	before := dbSnapshot(t, env)
	refusedBefore := sqlCount(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'alloc.create_refused'`)
	for _, req := range []api.AllocCreateRequest{
		{SKU: "h100-baremetal", GPUs: 8},
		{SKU: "h100-baremetal", GPUs: 8, Queue: true},
		{SKU: "h200-slice", GPUs: 1},
	} {
		_, err := c.AllocCreate(ctx, req)
		wantInsufficientFunds(t, err, req.SKU, "$0.00", "10 minutes")
	}
	after := dbSnapshot(t, env)
	// The audit rows of the refusals are the one change.
	after["audit_logs"], before["audit_logs"] = "", ""
	sameSnapshot(t, "refused creates", before, after)
	if n := sqlCount(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'alloc.create_refused'`) - refusedBefore; n != 3 {
		t.Fatalf("alloc.create_refused audit rows: got %d; want 3", n)
	}
	var actor, project string
	var detail []byte
	if err := env.Server.Pool().QueryRow(ctx, `SELECT actor_id, project_id, detail FROM audit_logs
		WHERE action = 'alloc.create_refused' ORDER BY id LIMIT 1`).Scan(&actor, &project, &detail); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(detail, &d); err != nil {
		t.Fatal(err)
	}
	if actor != env.Admin.ID || project != env.Project.ID || d["code"] != "insufficient_funds" || d["sku"] != "h100-baremetal" ||
		d["gpus"] != float64(8) || d["balance_minor"] != float64(0) || d["new_minor_per_hour"] != float64(1760) {
		t.Errorf("audit row by %s in %s with %v; want the admin, the project, the SKU, GPUs, balance and burn", actor, project, d)
	}

	// Topped up (here by an operator), the same create goes through.
	env.Credit(t, env.Project.Name, 300)
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); err != nil {
		t.Fatalf("create after the top-up: %v", err)
	}
}

// TestAllocCreateCountsRunningAllocations: the minimum runway is measured
// at the project's total burn, so a balance that would carry the new
// allocation alone is refused when what already runs eats it.
func TestAllocCreateCountsRunningAllocations(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{Unfunded: true})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	// 8 × $2.20/h = $17.60/h: 10 minutes cost $2.94 (293.33, rounded up).
	env.Credit(t, env.Project.Name, 294)
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	// $3.50/h alone would need 59 for 10 minutes; with the $17.60/h that
	// runs, $21.10/h needs 352.
	before := dbSnapshot(t, env)
	_, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	wantInsufficientFunds(t, err, "second allocation", "$2.94", "$21.10/h", "$17.60/h already running", "$3.52 is needed")
	after := dbSnapshot(t, env)
	after["audit_logs"], before["audit_logs"] = "", ""
	sameSnapshot(t, "the refused second create", before, after)
	env.Credit(t, env.Project.Name, 352-294)
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}); err != nil {
		t.Fatalf("with exactly 10 minutes of total burn: %v", err)
	}
}

// TestQueuedRequestUnfundedAtPlacementFails: a queued request is checked
// again when capacity frees. One its project can no longer pay for fails
// with the reason (an event and an audit row say so), its slots stay
// free, and the line moves on to the next project's request.
func TestQueuedRequestUnfundedAtPlacementFails(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	first, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	head, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Queue: true})
	if err != nil || !head.Queued {
		t.Fatalf("queue the head: %v %+v", err, head)
	}
	if _, err := c.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	env.Credit(t, "other", 100_00)
	behind, err := c.AllocCreate(ctx, api.AllocCreateRequest{Project: "other", SKU: "h100-baremetal", GPUs: 8, Queue: true})
	if err != nil || !behind.Queued {
		t.Fatalf("queue behind it: %v %+v", err, behind)
	}
	// The test project is debited to $1: with the first allocation still
	// counted, placing the head would burn $35.20/h.
	env.Credit(t, env.Project.Name, -(100_00 - 100))
	freeAllocSlots(t, env, first.ID)
	testutil.EventuallyWithin(t, 10*time.Second, "the request behind the head to be placed", func() bool {
		return getAlloc(t, c, behind.ID).State == api.AllocProvisioning
	})
	got := getAlloc(t, c, head.ID)
	if got.State != api.AllocFailed || got.Queued || len(got.Slots) != 0 || !strings.Contains(got.Reason, "insufficient funds") ||
		!strings.Contains(got.Reason, "left the queue") || !strings.Contains(got.Reason, "gpuaas admin credit") {
		t.Fatalf("head: %s queued=%v with %d slots (%q); want failed for insufficient funds, out of the queue, no slots",
			got.State, got.Queued, len(got.Slots), got.Reason)
	}
	if n := sqlCount(t, env, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND subject = $2
		AND payload->>'to' = 'failed' AND payload->>'reason' LIKE '%insufficient funds%'`, api.EventAllocState, head.ID); n != 1 {
		t.Errorf("failed events of the head: got %d; want 1", n)
	}
	if n := sqlCount(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'alloc.queued_unfunded' AND target_id = $1
		AND actor_id = $2`, head.ID, alloc.SchedulerActor); n != 1 {
		t.Errorf("alloc.queued_unfunded audit rows: got %d; want 1", n)
	}
	if n := sqlCount(t, env, `SELECT count(*) FROM slots WHERE allocation_id = $1`, head.ID); n != 0 {
		t.Errorf("the failed head holds %d slots; want 0", n)
	}
}

// TestDryRunRunwayCountsRunningAllocations is a money check before renting: the runway
// `alloc create --dry-run` showed ignored what already runs ("runway
// 1d 3h" while `billing balance` said "lasts about 3h"). It is the
// balance at the project's total burn, the new allocation included, and
// says when a create would be refused.
func TestDryRunRunwayCountsRunningAllocations(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{Unfunded: true})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	env.Credit(t, env.Project.Name, 10_00)
	running, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Active, as a successful provisioning report makes it: metered.
	if err := pgx.BeginFunc(ctx, env.Server.Pool(), func(tx pgx.Tx) error {
		_, err := alloc.ProvisionDone(ctx, tx, running.ID, hostproto.TaskSucceeded, "", time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	bal, err := c.BillingBalance(ctx, api.BillingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	// $14.00/h running + $7.00/h: $10 lasts 1000*3600/2100 s, and the
	// burn is billing balance's plus this one.
	if q.BurnPerHourMinor != 2100 || q.BurnPerHourMinor != bal.BurnRateMinorPerHour+q.PricePerHourMinor ||
		q.RunwaySeconds == nil || *q.RunwaySeconds != 1000*3600/2100 || q.InsufficientFunds {
		t.Errorf("quote burn %d runway %v refused=%v; want 2100/h (balance burns %d/h), %d s, not refused",
			q.BurnPerHourMinor, q.RunwaySeconds, q.InsufficientFunds, bal.BurnRateMinorPerHour, 1000*3600/2100)
	}
	// Too little for 10 minutes of the total: the quote says the create
	// would be refused, and what it would need.
	env.Credit(t, env.Project.Name, -(10_00 - 300))
	q, err = c.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !q.InsufficientFunds || q.NeededMinor != 350 || q.MinRunwaySeconds != 600 {
		t.Errorf("quote %+v; want refused, 350 needed for 600 s", q)
	}
	_, err = c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	wantInsufficientFunds(t, err, "the create the quote warned of", "$3.50 is needed")
}

// TestAllocCreateFundsCheckRace: two creates racing in one project each
// fit the balance alone, not together. Without the per-project lock each
// would see the balance without the other's allocation and both pass;
// with it exactly one goes through and the other is refused.
func TestAllocCreateFundsCheckRace(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{Unfunded: true})
	c := env.Client(env.AdminToken)
	// 4 × $3.50/h = $14.00/h needs 234 for 10 minutes; two need 467.
	env.Credit(t, env.Project.Name, 300)
	errs := make(chan error, 2)
	start := make(chan struct{})
	for range 2 {
		go func() {
			<-start
			_, err := c.AllocCreate(context.Background(), api.AllocCreateRequest{SKU: "h200-slice", GPUs: 4})
			errs <- err
		}()
	}
	close(start)
	var ok, refused int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, api.ErrInsufficientFunds):
			refused++
		default:
			t.Fatalf("racing create: %v", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("got %d created and %d refused; want 1 and 1", ok, refused)
	}
	if n := sqlCount(t, env, `SELECT count(*) FROM allocations WHERE project_id = $1`, env.Project.ID); n != 1 {
		t.Fatalf("allocations: got %d; want 1", n)
	}
}
