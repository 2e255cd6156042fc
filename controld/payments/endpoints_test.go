package payments_test

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/api"
)

// credit runs admin.credit as the admin, with header as its
// Gpuaas-Project header.
func (f *fixture) credit(t testing.TB, header string, req api.CreditRequest) (*api.CreditResponse, error) {
	t.Helper()
	defs := payments.Endpoints(payments.Deps{DB: f.app, Payments: f.svc})
	r := &endpoint.Request{Principal: &identity.Principal{UserID: adminID, Role: api.RoleAdmin}, Project: header}
	return endpointtest.Mutate[api.CreditResponse](context.Background(), f.mut,
		endpointtest.Find(t, defs, api.EndpointAdminCredit), r, req)
}

// TestCreditEndpointActsInTheHeadersProject: a credit that names no
// project lands in the Gpuaas-Project header's, recorded as the caller's
// with one audit row and one adjustment event.
func TestCreditEndpointActsInTheHeadersProject(t *testing.T) {
	f := newFixture(t)
	resp, err := f.credit(t, f.projectID, api.CreditRequest{AmountMinor: 2500, Reason: "goodwill after the outage"})
	if err != nil {
		t.Fatalf("credit: %v", err)
	}
	if resp.ProjectID != f.projectID || resp.BalanceMinor != 2500 {
		t.Errorf("credit: got project %s balance %d; want %s 2500", resp.ProjectID, resp.BalanceMinor, f.projectID)
	}
	if n := f.count(t, `SELECT count(*) FROM ledger_entries WHERE project_id = $1 AND actor_id = $2 AND kind = 'adjustment'`,
		f.projectID, adminID); n != 1 {
		t.Errorf("adjustment entries by the caller: got %d; want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1 AND actor_id = $2 AND project_id = $3`,
		api.EndpointAdminCredit, adminID, f.projectID); n != 1 {
		t.Errorf("audit rows: got %d; want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND project_id = $2`,
		api.EventAdjustment, f.projectID); n != 1 {
		t.Errorf("adjustment events: got %d; want 1", n)
	}
}

// TestCreditEndpointRefusalsWriteNothing: an adjustment of zero, one
// without a reason and one of a project that does not exist are refused
// with their catalog codes, and none writes a ledger entry or an audit
// row.
func TestCreditEndpointRefusalsWriteNothing(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name   string
		header string
		req    api.CreditRequest
		want   api.Code
	}{
		{"zero", f.projectID, api.CreditRequest{Reason: "nothing"}, api.CodeInvalidArgument},
		{"no reason", f.projectID, api.CreditRequest{AmountMinor: 100}, api.CodeInvalidArgument},
		{"too large", f.projectID, api.CreditRequest{AmountMinor: payments.MaxAdjustmentMinor + 1, Reason: "typo"}, api.CodeInvalidArgument},
		{"unknown project", "", api.CreditRequest{Project: "no-such-project", AmountMinor: 100, Reason: "lost"}, api.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.credit(t, tc.header, tc.req)
			if got := codeOf(err); got != tc.want {
				t.Errorf("got %v (%v); want %s", got, err, tc.want)
			}
		})
	}
	if n := f.count(t, `SELECT count(*) FROM ledger_entries`); n != 0 {
		t.Errorf("ledger entries after refusals: got %d; want 0", n)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1`, api.EndpointAdminCredit); n != 0 {
		t.Errorf("audit rows after refusals: got %d; want 0", n)
	}
}
