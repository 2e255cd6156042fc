package controld_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// dbSnapshot is every row a create (or a leaky quote) could leave behind:
// row counts of the tables a mutation writes, and each slot's state.
func dbSnapshot(t *testing.T, env *controldtest.Env) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, table := range []string{"allocations", "allocation_transitions", "node_tasks", "audit_logs",
		"outbox_events", "idempotency_keys"} {
		var n int
		if err := env.Server.Pool().QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = fmt.Sprint(n)
	}
	var slots string
	if err := env.Server.Pool().QueryRow(ctx,
		`SELECT coalesce(string_agg(id || '=' || state || ':' || coalesce(allocation_id, ''), ',' ORDER BY id), '') FROM slots`).
		Scan(&slots); err != nil {
		t.Fatal(err)
	}
	out["slots"] = slots
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed %s: got %s; want %s", what, k, after[k], v)
		}
	}
}

func TestAllocQuoteChangesNothing(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()

	before := dbSnapshot(t, env)
	q, err := c.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !q.Fits || q.NodeID == "" || q.Queued || q.QueuePosition != 0 {
		t.Errorf("got %+v; want a fit on a node, not queued", q)
	}
	if q.PricePerHourMinor != 700 || q.Currency != "usd" || q.SKU != "h200-slice" || q.GPUs != 2 || q.ProjectID != env.Project.ID {
		t.Errorf("got %+v; want 2 × 350 = 700 usd/h in the test project", q)
	}
	// The ledger answers: the test project's $100 last 10000*3600/700 s
	// at $7.00/h, nothing else running.
	if q.BalanceMinor == nil || *q.BalanceMinor != 100_00 || q.RunwaySeconds == nil || *q.RunwaySeconds != 100_00*3600/700 ||
		q.BurnPerHourMinor != 700 || q.InsufficientFunds {
		t.Errorf("got balance %v runway %v burn %d refused=%v; want 10000, %d, 700, not refused",
			q.BalanceMinor, q.RunwaySeconds, q.BurnPerHourMinor, q.InsufficientFunds, 100_00*3600/700)
	}
	sameSnapshot(t, "a fitting quote", before, dbSnapshot(t, env))

	// The quote's placement is the real one: creating for real lands on
	// the node it named.
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if a.NodeID != q.NodeID {
		t.Errorf("create placed on %s; the quote said %s", a.NodeID, q.NodeID)
	}
}

func TestAllocQuoteCapacityAndQueue(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()

	// The fleet has one bare-metal node: take it.
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	before := dbSnapshot(t, env)
	q, err := c.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if q.Fits || q.Queued || q.QueuePosition != 0 || q.NodeID != "" {
		t.Errorf("full fleet without --queue: got %+v; want no fit, not queued", q)
	}
	if q.PricePerHourMinor != 8*220 {
		t.Errorf("got price %d; want %d", q.PricePerHourMinor, 8*220)
	}
	q, err = c.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	if q.Fits || !q.Queued || q.QueuePosition != 1 {
		t.Errorf("full fleet with --queue: got %+v; want queued at position 1", q)
	}
	sameSnapshot(t, "a quote with no capacity", before, dbSnapshot(t, env))

	// One request waits already: the next one would be second in line.
	if w, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Queue: true}); err != nil || !w.Queued {
		t.Fatalf("queued create: %v %+v", err, w)
	}
	q, err = c.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Queue: true})
	if err != nil || q.QueuePosition != 2 {
		t.Fatalf("got %v %+v; want queue position 2", err, q)
	}
}

func TestAllocQuoteBadInput(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	_, viewerToken := env.AddUser(t, "viewer@example.test", api.RoleUser)
	if _, err := c.ProjectAddMember(ctx, api.AddMemberRequest{Project: env.Project.Name, Email: "viewer@example.test", Role: api.ProjectViewer}); err != nil {
		t.Fatal(err)
	}
	// Someone in no project has no default project either; the admin's
	// default (testproj) would be used.
	_, projectlessToken := env.AddUser(t, "projectless@example.test", api.RoleUser)
	before := dbSnapshot(t, env)
	tests := []struct {
		name string
		req  api.AllocCreateRequest
		c    *api.Client
		want error
	}{
		{"no sku", api.AllocCreateRequest{GPUs: 1}, c, api.ErrInvalidArgument},
		{"unknown sku", api.AllocCreateRequest{SKU: "nope", GPUs: 1}, c, api.ErrNotFound},
		{"gpu count not offered", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 3}, c, api.ErrInvalidArgument},
		{"zero gpus", api.AllocCreateRequest{SKU: "h200-slice"}, c, api.ErrInvalidArgument},
		{"unknown project", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, Project: "ghost"}, c, api.ErrNotFound},
		{"no project", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, env.Client(projectlessToken, api.WithProject("")), api.ErrInvalidArgument},
		{"not logged in", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, env.Client(""), api.ErrUnauthenticated},
		{"viewer cannot create", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, env.Client(viewerToken), api.ErrForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, quoteErr := tt.c.AllocQuote(ctx, tt.req)
			if !errors.Is(quoteErr, tt.want) {
				t.Fatalf("quote got %v; want %v", quoteErr, tt.want)
			}
			// Exactly like create: same code, same message.
			_, createErr := tt.c.AllocCreate(ctx, tt.req)
			if quoteErr.Error() != createErr.Error() {
				t.Errorf("quote said %q, create said %q; want the same", quoteErr, createErr)
			}
		})
	}
	sameSnapshot(t, "rejected quotes and creates", before, dbSnapshot(t, env))
}

func TestAllocQuoteBalance(t *testing.T) {
	t.Parallel()
	// The real ledger: an operator credits $10, and the quote reports it.
	env := controldtest.Start(t, controldtest.Options{Unfunded: true})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	if _, err := c.AdminCredit(ctx, api.CreditRequest{Project: env.Project.Name, AmountMinor: 1000, Reason: "quote test"}); err != nil {
		t.Fatal(err)
	}
	q, err := c.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	// 1000 minor units at 700 per hour: 1000*3600/700 = 5142 seconds.
	if q.BalanceMinor == nil || *q.BalanceMinor != 1000 || q.RunwaySeconds == nil || *q.RunwaySeconds != 5142 {
		t.Errorf("got balance %v runway %v; want 1000 and 5142", q.BalanceMinor, q.RunwaySeconds)
	}
}

func TestRunway(t *testing.T) {
	tests := []struct {
		name           string
		balance, price int64
		want           int64
		wantOK         bool
	}{
		{"an hour", 700, 700, 3600, true},
		{"rounds down", 1000, 700, 5142, true},
		{"empty", 0, 700, 0, true},
		{"in debt", -50, 700, 0, true},
		{"free", 1000, 0, 0, false},
		{"large balance", 1 << 50, 3, (1 << 50) * 1200, true}, // exact, where balance*3600 would overflow at 1<<52
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := alloc.Runway(tt.balance, tt.price)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("got %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
