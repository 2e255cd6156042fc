package payments_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

const adminID = "u-admin"

// refund runs a refund as a mutation, as controld's admin.refund does.
func (f *fixture) refund(t testing.TB, req api.RefundRequest) (api.RefundResponse, error) {
	t.Helper()
	key := ids.New("k")
	var resp api.RefundResponse
	_, err := f.mut.Run(context.Background(), mutate.Request{Endpoint: api.EndpointAdminRefund, ActorID: adminID, Key: key},
		func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			var eff mutate.Effect
			var err error
			resp, eff, err = f.svc.Refund(ctx, tx, payments.RefundInput{RefundRequest: req, ActorID: adminID, RequestKey: adminID + "\n" + key})
			return resp, eff, err
		})
	return resp, err
}

func (f *fixture) adjust(t testing.TB, req api.CreditRequest) (api.CreditResponse, error) {
	t.Helper()
	var resp api.CreditResponse
	_, err := f.mut.Run(context.Background(), mutate.Request{Endpoint: api.EndpointAdminCredit, ActorID: adminID, Key: ids.New("k")},
		func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			var eff mutate.Effect
			var err error
			resp, eff, err = f.svc.Adjust(ctx, tx, f.projectID, adminID, req)
			return resp, eff, err
		})
	return resp, err
}

func codeOf(err error) api.Code {
	if err == nil {
		return ""
	}
	return api.CodeOf(err)
}

func TestRefundThroughStripeMirrorsADebit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	session, pi := f.paidTopup(t, 5000)

	r, err := f.refund(t, api.RefundRequest{Topup: session, AmountMinor: 2000, Reason: "asked nicely"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.RefundID, "re_") || r.AmountMinor != 2000 || r.RefundedMinor != 2000 || r.RemainingMinor != 3000 ||
		r.PaymentIntent != pi || r.ProjectID != f.projectID {
		t.Errorf("got %+v", r)
	}
	if b := f.balance(t); b != 3000 {
		t.Errorf("balance %d; want 3000", b)
	}
	if n := f.count(t, `SELECT count(*) FROM ledger_entries WHERE kind = 'refund' AND reference = $1 AND amount_minor = -2000
		AND actor_id = $2 AND id = $3 AND memo LIKE '%asked nicely%'`, r.RefundID, adminID, r.LedgerEntryID); n != 1 {
		t.Error("the refund is not mirrored as a debit referencing the refund id")
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'admin.refund' AND actor_id = $1 AND project_id = $2`, adminID, f.projectID); n != 1 {
		t.Errorf("got %d audit rows; want 1", n)
	}

	// By payment intent, and without an amount: all that remains.
	r2, err := f.refund(t, api.RefundRequest{Topup: pi})
	if err != nil {
		t.Fatal(err)
	}
	if r2.AmountMinor != 3000 || r2.RemainingMinor != 0 || r2.RefundID == r.RefundID {
		t.Errorf("got %+v; want the remaining 3000 under a new refund id", r2)
	}
	if b := f.balance(t); b != 0 {
		t.Errorf("balance %d; want 0", b)
	}
	if _, err := f.refund(t, api.RefundRequest{Topup: session, AmountMinor: 1}); codeOf(err) != api.CodeConflict {
		t.Errorf("refund of a fully refunded top-up: got %v; want conflict", err)
	}
	if n := f.count(t, `SELECT count(*) FROM stripe_checkout_sessions WHERE id = $1 AND refunded_minor = 5000`, session); n != 1 {
		t.Error("the session does not record the refunded amount")
	}
}

func TestRefundRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	session, _ := f.paidTopup(t, 5000)
	open, err := f.checkout(t, f.svc, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// 4,000 of the credit is spent.
	if _, err := f.adjust(t, api.CreditRequest{AmountMinor: -4000, Reason: "usage stand-in"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  api.RefundRequest
		want api.Code
	}{
		{"more than was paid", api.RefundRequest{Topup: session, AmountMinor: 5001}, api.CodeInvalidArgument},
		{"more than the balance", api.RefundRequest{Topup: session, AmountMinor: 2000}, api.CodeInsufficientFunds},
		{"all, more than the balance", api.RefundRequest{Topup: session}, api.CodeInsufficientFunds},
		{"negative", api.RefundRequest{Topup: session, AmountMinor: -1}, api.CodeInvalidArgument},
		{"unknown top-up", api.RefundRequest{Topup: "cs_test_nothing"}, api.CodeNotFound},
		{"unpaid top-up", api.RefundRequest{Topup: open.SessionID}, api.CodeConflict},
		{"no top-up", api.RefundRequest{}, api.CodeInvalidArgument},
		{"reason too long", api.RefundRequest{Topup: session, AmountMinor: 100, Reason: strings.Repeat("x", payments.MaxReasonLength+1)}, api.CodeInvalidArgument},
	}
	for _, tt := range tests {
		if _, err := f.refund(t, tt.req); codeOf(err) != tt.want {
			t.Errorf("%s: got %v; want %s", tt.name, err, tt.want)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM ledger_entries WHERE kind = 'refund'`); n != 0 {
		t.Errorf("got %d refund entries; want 0", n)
	}
	if n := f.count(t, `SELECT count(*) FROM stripe_refunds`); n != 0 {
		t.Errorf("got %d refunds recorded; want 0", n)
	}
	// What the balance covers is refundable.
	if _, err := f.refund(t, api.RefundRequest{Topup: session, AmountMinor: 1000}); err != nil {
		t.Fatalf("refund within the balance: %v", err)
	}
	// Without Stripe, refunds are unavailable.
	f.svc = f.service(t, payments.Settings{})
	if _, err := f.refund(t, api.RefundRequest{Topup: session, AmountMinor: 1}); !errors.Is(err, payments.ErrNotConfigured) {
		t.Errorf("without Stripe: got %v; want ErrNotConfigured", err)
	}
}

func TestConcurrentRefundsNeverExceedThePayment(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	session, _ := f.paidTopup(t, 5000)
	if _, err := f.adjust(t, api.CreditRequest{AmountMinor: 10000, Reason: "so the balance is not the limit"}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.refund(t, api.RefundRequest{Topup: session, AmountMinor: 3000})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case codeOf(err) != api.CodeInvalidArgument:
			t.Errorf("got %v; want success or invalid_argument", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d refunds of 3000 out of 5000 succeeded; want 1", ok)
	}
	if b := f.balance(t); b != 12000 {
		t.Errorf("balance %d; want 12000", b)
	}
}

func TestManualAdjustments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r, err := f.adjust(t, api.CreditRequest{AmountMinor: 2500, Reason: "outage credit"})
	if err != nil {
		t.Fatal(err)
	}
	if r.BalanceMinor != 2500 || r.AmountMinor != 2500 || r.Reason != "outage credit" {
		t.Errorf("got %+v", r)
	}
	if r, err = f.adjust(t, api.CreditRequest{AmountMinor: -500, Reason: "goodwill reversed"}); err != nil || r.BalanceMinor != 2000 {
		t.Fatalf("debit: %+v, %v; want balance 2000", r, err)
	}
	for _, bad := range []api.CreditRequest{
		{AmountMinor: 100},
		{AmountMinor: 100, Reason: "   "},
		{AmountMinor: 0, Reason: "nothing"},
		{AmountMinor: payments.MaxAdjustmentMinor + 1, Reason: "a fortune"},
		{AmountMinor: 100, Reason: strings.Repeat("x", payments.MaxReasonLength+1)},
	} {
		if _, err := f.adjust(t, bad); codeOf(err) != api.CodeInvalidArgument {
			t.Errorf("%+v: got %v; want invalid_argument", bad, err)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM ledger_entries WHERE kind = 'adjustment' AND actor_id = $1`, adminID); n != 2 {
		t.Errorf("got %d adjustment entries; want 2", n)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'admin.credit' AND actor_id = $1
		AND detail->>'reason' IN ('outage credit', 'goodwill reversed')`, adminID); n != 2 {
		t.Errorf("got %d audit rows with reasons; want 2", n)
	}
}
