package payments_test

import (
	"net/http"
	"testing"

	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// TestWebhookCreditsTheCreatedAmount: a top-up credits what controld
// asked Stripe for when it created the Checkout Session, never the
// event's own figure. A paid event for one of our sessions that names
// another amount (or currency), or a session controld never created,
// credits nothing and is audited; the created amount is credited once the
// event agrees with it.
func TestWebhookCreditsTheCreatedAmount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, err := f.checkout(t, f.svc, 1500)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		object map[string]any
		want   string
	}{
		{"an event naming a larger amount", sessionObject(resp.SessionID, f.projectID, 1_000_000, "paid", "pi_big"), payments.OutcomeMismatch},
		{"an event naming a smaller amount", sessionObject(resp.SessionID, f.projectID, 500, "paid", "pi_small"), payments.OutcomeMismatch},
		{"another currency", withField(sessionObject(resp.SessionID, f.projectID, 1500, "paid", "pi_eur"), "currency", "eur"), payments.OutcomeMismatch},
		{"a session controld never created", sessionObject("cs_test_forged", f.projectID, 1_000_000, "paid", "pi_forged"), payments.OutcomeUnknown},
	}
	for _, st := range steps {
		payload := eventJSON(t, ids.New("evt"), "checkout.session.completed", st.object)
		code, body := f.deliver(t, payload, f.sign(payload, f.clock.Now()))
		if code != http.StatusOK || outcomeOf(t, body) != st.want {
			t.Errorf("%s: got %d %s; want 200 %s", st.name, code, body, st.want)
		}
		if b := f.balance(t); b != 0 {
			t.Fatalf("%s: balance %d; want nothing credited", st.name, b)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'billing.topup_refused' AND actor_id = 'stripe'
		AND target_id = $1 AND project_id = $2 AND (detail->>'amount_minor')::bigint = 1500`, resp.SessionID, f.projectID); n != 3 {
		t.Errorf("audited refusals of the session: got %d; want 3", n)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'billing.topup_refused'
		AND target_id = 'cs_test_forged' AND detail->>'reason' = 'unknown checkout session'`); n != 1 {
		t.Errorf("audited refusals of the unknown session: got %d; want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM stripe_checkout_sessions WHERE id = $1 AND state = 'open'`, resp.SessionID); n != 1 {
		t.Error("the session changed")
	}

	payload := eventJSON(t, ids.New("evt"), "checkout.session.completed", sessionObject(resp.SessionID, f.projectID, 1500, "paid", "pi_ok"))
	if code, body := f.deliver(t, payload, f.sign(payload, f.clock.Now())); code != http.StatusOK || outcomeOf(t, body) != payments.OutcomeCredited {
		t.Fatalf("the agreeing event: got %d %s; want 200 credited", code, body)
	}
	if n := f.count(t, `SELECT count(*) FROM ledger_entries WHERE kind = 'topup' AND reference = $1 AND amount_minor = 1500`, resp.SessionID); n != 1 || f.balance(t) != 1500 {
		t.Errorf("got %d top-ups of 1500, balance %d; want one, 1500", n, f.balance(t))
	}
}
