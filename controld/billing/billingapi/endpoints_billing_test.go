package billingapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// book appends entries of amounts to the project's ledger.
func (f *fixture) book(t *testing.T, amounts ...int64) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), f.owner, func(tx pgx.Tx) error {
		for _, a := range amounts {
			if _, _, err := billing.Append(context.Background(), tx, billing.Entry{ProjectID: f.projectID,
				Kind: billing.KindAdjustment, Reference: ids.New("adj"), AmountMinor: a, Memo: "test", ActorID: f.alice,
				CreatedAt: now}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("book %v: %v", amounts, err)
	}
}

// TestLedgerEndpointBoundsAndAccess: a page is 0..1000 entries from a
// non-negative cursor, anything else invalid_argument; a member reads
// the project's ledger, a user outside it finds no project.
func TestLedgerEndpointBoundsAndAccess(t *testing.T) {
	f := newFixture(t, billing.Settings{})
	f.book(t, 1000, -100, 50)
	ledger := f.Find(t, api.EndpointBillingLedger)
	read := func(r *endpoint.Request, req api.BillingLedgerRequest) (*api.BillingLedgerResponse, error) {
		return endpointtest.Read[api.BillingLedgerResponse](context.Background(), ledger, r, req)
	}
	for _, tc := range []struct {
		name string
		r    *endpoint.Request
		req  api.BillingLedgerRequest
		want api.Code
	}{
		{"negative limit", as(f.bob), api.BillingLedgerRequest{Project: f.project, Limit: -1}, api.CodeInvalidArgument},
		{"limit over 1000", as(f.bob), api.BillingLedgerRequest{Project: f.project, Limit: 1001}, api.CodeInvalidArgument},
		{"negative cursor", as(f.bob), api.BillingLedgerRequest{Project: f.project, Before: -1}, api.CodeInvalidArgument},
		{"outsider", as(f.carol), api.BillingLedgerRequest{Project: f.project}, api.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := read(tc.r, tc.req); codeOf(err) != tc.want {
				t.Errorf("got %v (%v); want %s", codeOf(err), err, tc.want)
			}
		})
	}
	page, err := read(as(f.bob), api.BillingLedgerRequest{Project: f.project, Limit: 1000})
	if err != nil {
		t.Fatalf("a member's page of 1000: %v", err)
	}
	if page.ProjectID != f.projectID || len(page.Entries) != 3 {
		t.Fatalf("ledger: got project %s with %d entries; want %s with 3", page.ProjectID, len(page.Entries), f.projectID)
	}
	for _, e := range page.Entries {
		if e.Hash == "" || e.ActorID != f.alice || e.Kind != string(billing.KindAdjustment) {
			t.Errorf("entry %d: got hash %q actor %s kind %s; want a hash, %s, adjustment", e.ID, e.Hash, e.ActorID, e.Kind, f.alice)
		}
	}
}

// TestBalanceEndpointUsesTheSettings: an account that set no threshold
// is low against billing's default threshold, and a depleted one's grace
// ends billing's grace period after it ran out.
func TestBalanceEndpointUsesTheSettings(t *testing.T) {
	const grace = 90 * time.Minute
	f := newFixture(t, billing.Settings{Grace: grace, LowBalanceThresholdMinor: 5000})
	balance := f.Find(t, api.EndpointBillingBalance)
	f.book(t, 1000)
	inHeader := as(f.bob)
	inHeader.Project = f.projectID
	b, err := endpointtest.Read[api.BillingBalance](context.Background(), balance, inHeader, api.BillingRequest{})
	if err != nil {
		t.Fatalf("balance: %v", err)
	}
	if b.ProjectID != f.projectID || b.BalanceMinor != 1000 || b.LowBalanceThresholdMinor != 5000 || !b.LowBalance ||
		b.GraceEndsAt != nil {
		t.Errorf("balance: got %+v; want 1000 in %s, low against 5000, no grace", b, f.projectID)
	}
	ranOut := now.Add(-time.Hour)
	if _, err := f.owner.Exec(context.Background(), `UPDATE billing_accounts SET depleted_at = $2 WHERE project_id = $1`,
		f.projectID, ranOut); err != nil {
		t.Fatal(err)
	}
	b, err = endpointtest.Read[api.BillingBalance](context.Background(), balance, as(f.alice), api.BillingRequest{Project: f.project})
	if err != nil {
		t.Fatalf("balance: %v", err)
	}
	if b.GraceEndsAt == nil || !b.GraceEndsAt.Equal(ranOut.Add(grace)) {
		t.Errorf("grace ends at: got %v; want %v", b.GraceEndsAt, ranOut.Add(grace))
	}
	if _, err := endpointtest.Read[api.BillingBalance](context.Background(), balance, as(f.carol),
		api.BillingRequest{Project: f.project}); codeOf(err) != api.CodeNotFound {
		t.Errorf("balance as an outsider: got %v; want not_found", err)
	}
}

// TestUsageEndpointScopes: usage of an allocation, of volumes, of jobs
// and of workloads are asked for apart, and volumes' windows are bounded;
// each refusal is invalid_argument. A project with nothing metered
// answers empty lists, not null.
func TestUsageEndpointScopes(t *testing.T) {
	f := newFixture(t, billing.Settings{})
	usage := f.Find(t, api.EndpointBillingUsage)
	read := func(r *endpoint.Request, req api.BillingUsageRequest) (*api.BillingUsageResponse, error) {
		return endpointtest.Read[api.BillingUsageResponse](context.Background(), usage, r, req)
	}
	for _, tc := range []struct {
		name string
		req  api.BillingUsageRequest
		want api.Code
	}{
		{"volumes and an allocation", api.BillingUsageRequest{Project: f.project, Volumes: true, Allocation: "a-1"}, api.CodeInvalidArgument},
		{"volume windows negative", api.BillingUsageRequest{Project: f.project, Volumes: true, Windows: -1}, api.CodeInvalidArgument},
		{"volume windows over the maximum", api.BillingUsageRequest{Project: f.project, Volumes: true, Windows: 10001}, api.CodeInvalidArgument},
		{"jobs and an allocation", api.BillingUsageRequest{Project: f.project, Jobs: true, Allocation: "a-1"}, api.CodeInvalidArgument},
		{"a job and an allocation", api.BillingUsageRequest{Project: f.project, Job: "j-1", Allocation: "a-1"}, api.CodeInvalidArgument},
		{"workloads and jobs", api.BillingUsageRequest{Project: f.project, Workloads: true, Jobs: true}, api.CodeInvalidArgument},
		{"a workload and volumes", api.BillingUsageRequest{Project: f.project, Workload: "w-1", Volumes: true}, api.CodeInvalidArgument},
		{"no such allocation", api.BillingUsageRequest{Allocation: "a-nothing"}, api.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := read(as(f.alice), tc.req); codeOf(err) != tc.want {
				t.Errorf("got %v (%v); want %s", codeOf(err), err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		req  api.BillingUsageRequest
		list func(*api.BillingUsageResponse) bool
	}{
		{"allocations", api.BillingUsageRequest{Project: f.project}, func(u *api.BillingUsageResponse) bool { return u.Usage != nil }},
		{"volumes", api.BillingUsageRequest{Project: f.project, Volumes: true, Windows: 10000},
			func(u *api.BillingUsageResponse) bool { return u.Volumes != nil }},
		{"jobs", api.BillingUsageRequest{Project: f.project, Jobs: true}, func(u *api.BillingUsageResponse) bool { return u.Jobs != nil }},
		{"workloads", api.BillingUsageRequest{Project: f.project, Workloads: true},
			func(u *api.BillingUsageResponse) bool { return u.Workloads != nil }},
	} {
		t.Run("empty "+tc.name, func(t *testing.T) {
			u, err := read(as(f.bob), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if u.ProjectID != f.projectID || !tc.list(u) || u.Usage == nil || u.TotalMinor != 0 {
				t.Errorf("got %+v; want empty lists of %s", u, f.projectID)
			}
		})
		t.Run("outsider "+tc.name, func(t *testing.T) {
			if _, err := read(as(f.carol), tc.req); codeOf(err) != api.CodeNotFound {
				t.Errorf("got %v; want not_found", err)
			}
		})
	}
}
