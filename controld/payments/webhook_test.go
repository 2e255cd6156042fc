package payments_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/ids"
)

func TestConcurrentDeliveriesOfOneEventCreditOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, err := f.checkout(t, f.svc, 5000)
	if err != nil {
		t.Fatal(err)
	}
	evID := ids.New("evt")
	payload := eventJSON(t, evID, "checkout.session.completed", sessionObject(resp.SessionID, f.projectID, 5000, "paid", "pi_concurrent"))
	header := f.sign(payload, f.clock.Now())

	const deliveries = 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for range deliveries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := f.deliver(t, payload, header)
			mu.Lock()
			defer mu.Unlock()
			if code != http.StatusOK {
				outcomes["status "+http.StatusText(code)]++
				return
			}
			outcomes[outcomeOf(t, body)]++
		}()
	}
	wg.Wait()
	if outcomes[payments.OutcomeCredited] != 1 || outcomes[payments.OutcomeDuplicate] != deliveries-1 {
		t.Errorf("outcomes %v; want 1 credited and %d duplicate", outcomes, deliveries-1)
	}
	if n := f.count(t, `SELECT count(*) FROM ledger_entries WHERE project_id = $1`, f.projectID); n != 1 {
		t.Errorf("got %d ledger entries; want 1", n)
	}
	if b := f.balance(t); b != 5000 {
		t.Errorf("got balance %d; want 5000", b)
	}
	if n := f.count(t, `SELECT count(*) FROM ledger_entries WHERE kind = 'topup' AND reference = $1 AND amount_minor = 5000`, resp.SessionID); n != 1 {
		t.Errorf("got %d top-up entries for %s; want 1", n, resp.SessionID)
	}
	if n := f.count(t, `SELECT count(*) FROM stripe_events WHERE id = $1 AND outcome = 'credited'`, evID); n != 1 {
		t.Errorf("got %d recorded events; want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM stripe_checkout_sessions WHERE id = $1 AND state = 'paid'
		AND payment_intent = 'pi_concurrent' AND paid_minor = 5000 AND paid_event_id = $2`, resp.SessionID, evID); n != 1 {
		t.Error("the session is not recorded as paid by the event")
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE actor_id = 'stripe' AND action = 'billing.topup' AND project_id = $1`, f.projectID); n != 1 {
		t.Errorf("got %d audit rows; want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox_events WHERE kind = 'billing.topup' AND $1 = ANY(users)`, f.userID); n != 1 {
		t.Errorf("got %d events for the owner; want 1", n)
	}
}

func TestRefusedDeliveriesWriteNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, err := f.checkout(t, f.svc, 2500)
	if err != nil {
		t.Fatal(err)
	}
	object := sessionObject(resp.SessionID, f.projectID, 2500, "paid", "pi_refused")
	payload := eventJSON(t, ids.New("evt"), "checkout.session.completed", object)
	now := f.clock.Now()
	var reserialized bytes.Buffer // compacted: same content, no spaces
	if err := json.Compact(&reserialized, payload); err != nil {
		t.Fatal(err)
	}
	var generic map[string]any // decoded and encoded again, as a framework would
	if err := json.Unmarshal(payload, &generic); err != nil {
		t.Fatal(err)
	}
	reencoded, _ := json.Marshal(generic)
	otherVersion := eventJSONVersion(t, ids.New("evt"), "checkout.session.completed", "2022-11-15", object)
	notJSON := []byte("this is not an event")
	tests := []struct {
		name    string
		payload []byte
		header  string
		want    int
	}{
		{"no signature", payload, "", http.StatusBadRequest},
		{"garbled header", payload, "t=abc,v1=zz", http.StatusBadRequest},
		{"wrong secret", payload, signWith(payload, now, "whsec_someone_else"), http.StatusBadRequest},
		{"signature of another body", payload, f.sign(otherVersion, now), http.StatusBadRequest},
		{"compacted body", reserialized.Bytes(), f.sign(payload, now), http.StatusBadRequest},
		{"re-encoded body", reencoded, f.sign(payload, now), http.StatusBadRequest},
		{"older than the tolerance", payload, f.sign(payload, now.Add(-payments.DefaultTolerance-time.Second)), http.StatusBadRequest},
		{"far in the future", payload, f.sign(payload, now.Add(payments.DefaultTolerance+time.Second)), http.StatusBadRequest},
		{"signed at wall-clock time", payload, f.sign(payload, time.Now()), http.StatusBadRequest},
		{"other API version", otherVersion, f.sign(otherVersion, now), http.StatusBadRequest},
		{"signed garbage", notJSON, f.sign(notJSON, now), http.StatusBadRequest},
		{"too large", bytes.Repeat([]byte(" "), payments.MaxWebhookBody+1), f.sign(payload, now), http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		if code, body := f.deliver(t, tt.payload, tt.header); code != tt.want {
			t.Errorf("%s: got %d %s; want %d", tt.name, code, strings.TrimSpace(body), tt.want)
		}
	}
	if bytes.Equal(reencoded, payload) || bytes.Equal(reserialized.Bytes(), payload) {
		t.Fatal("a re-serialized body is byte-identical; the test proves nothing")
	}
	for _, table := range []string{"ledger_entries", "stripe_events", "audit_logs", "outbox_events"} {
		if n := f.count(t, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%s has %d rows after refused deliveries; want 0", table, n)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM stripe_checkout_sessions WHERE state = 'open'`); n != 1 {
		t.Error("the session changed")
	}

	// The same payload, properly signed just inside the tolerance of the
	// injected clock, is accepted: what was refused was the signature or
	// the timestamp, not the event.
	if code, body := f.deliver(t, payload, f.sign(payload, now.Add(-payments.DefaultTolerance+time.Second))); code != http.StatusOK || outcomeOf(t, body) != payments.OutcomeCredited {
		t.Fatalf("valid delivery: got %d %s; want 200 credited", code, body)
	}
	// Time passes: the same signed delivery, now too old, is refused
	// before the duplicate check.
	f.clock.Advance(2 * time.Second)
	if code, _ := f.deliver(t, payload, f.sign(payload, now.Add(-payments.DefaultTolerance+time.Second))); code != http.StatusBadRequest {
		t.Fatalf("replay after the tolerance: got %d; want 400", code)
	}
	if b := f.balance(t); b != 2500 {
		t.Errorf("got balance %d; want 2500", b)
	}
}

func TestUnknownEventTypeIsAcknowledgedAndIgnored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, typ := range []string{"customer.created", "charge.succeeded", "checkout.session.expired"} {
		payload := eventJSON(t, ids.New("evt"), typ, map[string]any{"id": "obj_1", "object": "thing"})
		code, body := f.deliver(t, payload, f.sign(payload, f.clock.Now()))
		if code != http.StatusOK || outcomeOf(t, body) != payments.OutcomeIgnored {
			t.Errorf("%s: got %d %s; want 200 ignored", typ, code, body)
		}
	}
	for _, table := range []string{"ledger_entries", "stripe_events", "audit_logs"} {
		if n := f.count(t, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%s has %d rows; want 0", table, n)
		}
	}
	// GET is not a delivery.
	resp, err := http.Get(f.webhook)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: got %d; want 405", resp.StatusCode)
	}
}

func TestCheckoutCompletionsCreditPaidSessionsOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, err := f.checkout(t, f.svc, 1500)
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(typ string, object map[string]any) string {
		t.Helper()
		payload := eventJSON(t, ids.New("evt"), typ, object)
		code, body := f.deliver(t, payload, f.sign(payload, f.clock.Now()))
		if code != http.StatusOK {
			t.Fatalf("%s: got %d %s", typ, code, body)
		}
		return outcomeOf(t, body)
	}
	steps := []struct {
		name   string
		typ    string
		object map[string]any
		want   string
		credit int64
	}{
		{"completed but unpaid (a delayed payment method)", "checkout.session.completed",
			sessionObject(resp.SessionID, f.projectID, 1500, "unpaid", "pi_async"), payments.OutcomeNotPaid, 0},
		{"a session controld did not create", "checkout.session.completed",
			sessionObject("cs_test_not_ours", f.projectID, 1500, "paid", "pi_other"), payments.OutcomeUnknown, 0},
		{"paid in another currency", "checkout.session.async_payment_succeeded",
			withField(sessionObject(resp.SessionID, f.projectID, 1500, "paid", "pi_async"), "currency", "eur"), payments.OutcomeMismatch, 0},
		{"paid for another project", "checkout.session.async_payment_succeeded",
			sessionObject(resp.SessionID, ids.New("p"), 1500, "paid", "pi_async"), payments.OutcomeMismatch, 0},
		{"async payment succeeded", "checkout.session.async_payment_succeeded",
			sessionObject(resp.SessionID, f.projectID, 1500, "paid", "pi_async"), payments.OutcomeCredited, 1500},
		{"another event for the same session", "checkout.session.completed",
			sessionObject(resp.SessionID, f.projectID, 1500, "paid", "pi_async"), payments.OutcomeAlready, 1500},
	}
	for _, st := range steps {
		if got := deliver(st.typ, st.object); got != st.want {
			t.Errorf("%s: got %s; want %s", st.name, got, st.want)
		}
		if b := f.balance(t); b != st.credit {
			t.Errorf("%s: balance %d; want %d", st.name, b, st.credit)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM stripe_events`); n != len(steps) {
		t.Errorf("got %d recorded events; want %d", n, len(steps))
	}
}

func withField(m map[string]any, k string, v any) map[string]any {
	m[k] = v
	return m
}

func TestWebhookWithoutSecretIsUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := httptest.NewServer(f.service(t, payments.Settings{}).WebhookHandler())
	t.Cleanup(srv.Close)
	f.webhook = srv.URL
	resp, err := f.checkout(t, f.svc, 1000)
	if err != nil {
		t.Fatal(err)
	}
	payload := eventJSON(t, ids.New("evt"), "checkout.session.completed", sessionObject(resp.SessionID, f.projectID, 1000, "paid", "pi_x"))
	if code, body := f.deliver(t, payload, f.sign(payload, f.clock.Now())); code != http.StatusServiceUnavailable {
		t.Errorf("got %d %s; want 503", code, body)
	}
	if n := f.count(t, `SELECT count(*) FROM ledger_entries`); n != 0 {
		t.Errorf("got %d ledger entries; want 0", n)
	}
}
