package payments_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// stripeIdempotency stands in front of stripe-mock, which keeps no
// idempotency keys, and adds what Stripe does with them
// (https://docs.stripe.com/api/idempotent_requests): the first answer to
// a request with an Idempotency-Key is saved and replayed to every later
// request with that key, and a later request with that key but other
// parameters is refused with an idempotency_error. keys are the
// Idempotency-Keys Stripe was sent, in order.
type stripeIdempotency struct {
	upstream string
	// mu protects the following; it is held for a whole request, so
	// that two requests with one key are answered one after the other.
	mu    sync.Mutex
	saved map[string]savedReply
	keys  []string
}

// savedReply is Stripe's answer to a request with an idempotency key,
// and the parameters it was sent with.
type savedReply struct {
	params, body []byte
	status       int
	contentType  string
}

// newStripe starts a stripeIdempotency in front of the stripe-mock at
// upstream and returns it with its base URL.
func newStripe(t *testing.T, upstream string) (*stripeIdempotency, string) {
	t.Helper()
	s := &stripeIdempotency{upstream: upstream, saved: map[string]savedReply{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func (s *stripeIdempotency) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	params, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" {
		s.keys = append(s.keys, key)
		if prev, ok := s.saved[key]; ok {
			if !bytes.Equal(prev.params, params) {
				prev = savedReply{status: http.StatusBadRequest, contentType: "application/json", body: []byte(`{"error":{` +
					`"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`)}
			}
			w.Header().Set("Content-Type", prev.contentType)
			w.WriteHeader(prev.status)
			_, _ = w.Write(prev.body)
			return
		}
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, s.upstream+r.URL.RequestURI(), bytes.NewReader(params))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	reply := savedReply{params: params, body: body, status: resp.StatusCode, contentType: resp.Header.Get("Content-Type")}
	if key != "" {
		s.saved[key] = reply
	}
	w.Header().Set("Content-Type", reply.contentType)
	w.WriteHeader(reply.status)
	_, _ = w.Write(reply.body)
}

// sent is how many requests with an Idempotency-Key Stripe was sent, and
// how many distinct keys they carried.
func (s *stripeIdempotency) sent() (requests, distinct int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, k := range s.keys {
		seen[k] = true
	}
	return len(s.keys), len(seen)
}

// keyed is the fixture's payments endpoints over a Service that talks to
// Stripe through a stripeIdempotency, with bob a second member of the
// project.
type keyed struct {
	*fixture
	stripe *stripeIdempotency
	defs   []endpoint.Def
	bob    string
}

func newKeyed(t *testing.T) *keyed {
	t.Helper()
	f := newFixture(t)
	settings := f.svc.Settings()
	k := &keyed{fixture: f, bob: ids.New(ids.User)}
	k.stripe, settings.APIBase = newStripe(t, settings.APIBase)
	svc := f.service(t, settings)
	k.defs = payments.Endpoints(payments.Deps{DB: f.app, Payments: svc})
	storetest.User(t, f.owner, k.bob, k.bob+"@example.test", time.Now())
	storetest.Member(t, f.owner, f.projectID, k.bob, api.ProjectMember, time.Now())
	return k
}

// request is user's request, of platform role, in the fixture's project
// under the Idempotency-Key key, with a correlation id of its own.
func (k *keyed) request(user, role, key string) *endpoint.Request {
	return &endpoint.Request{Principal: &identity.Principal{UserID: user, Role: role}, Project: k.projectID,
		IdempotencyKey: key, Corr: ids.New("corr")}
}

// topup runs billing.topup of amount as user under the Idempotency-Key key.
func (k *keyed) topup(t *testing.T, user, key string, amount int64) (*api.TopupResponse, error) {
	t.Helper()
	return endpointtest.Mutate[api.TopupResponse](context.Background(), k.mut,
		endpointtest.Find(t, k.defs, api.EndpointBillingTopup), k.request(user, api.RoleUser, key), api.TopupRequest{AmountMinor: amount})
}

// TestTopupStripeKeyIsTheCallersOwn: Stripe's idempotency key of a
// top-up is the caller's Idempotency-Key prefixed with the caller, as
// mutate keys its records. Two members sending the same key get a
// Checkout Session each; one member sending it twice gets one (the
// second is mutate's replay, which asks Stripe nothing); a new key of
// the same member is a new top-up.
func TestTopupStripeKeyIsTheCallersOwn(t *testing.T) {
	t.Parallel()
	k := newKeyed(t)
	owner1, err := k.topup(t, k.userID, "same-key", 5000)
	if err != nil {
		t.Fatalf("owner: %v", err)
	}
	bob, err := k.topup(t, k.bob, "same-key", 5000)
	if err != nil {
		t.Fatalf("bob, with the owner's key: %v", err)
	}
	owner2, err := k.topup(t, k.userID, "same-key", 5000)
	if err != nil {
		t.Fatalf("owner again: %v", err)
	}
	owner3, err := k.topup(t, k.userID, "other-key", 5000)
	if err != nil {
		t.Fatalf("owner, another key: %v", err)
	}
	if bob.SessionID == owner1.SessionID || owner2.SessionID != owner1.SessionID || owner3.SessionID == owner1.SessionID {
		t.Errorf("sessions: owner %s, bob %s, owner again %s, owner with another key %s; "+
			"want bob's and the other key's new, the repeat the first", owner1.SessionID, bob.SessionID, owner2.SessionID, owner3.SessionID)
	}
	for user, want := range map[string]int{k.userID: 2, k.bob: 1} {
		if n := k.count(t, `SELECT count(*) FROM stripe_checkout_sessions WHERE user_id = $1 AND project_id = $2`,
			user, k.projectID); n != want {
			t.Errorf("sessions of %s: got %d; want %d", user, n, want)
		}
	}
	if n := k.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1`, api.EndpointBillingTopup); n != 3 {
		t.Errorf("billing.topup audit rows: got %d; want 3", n)
	}
	if requests, distinct := k.stripe.sent(); requests != 3 || distinct != 3 {
		t.Errorf("Stripe was sent %d requests with %d distinct keys; want 3 and 3", requests, distinct)
	}
}

// TestTopupRetryAfterRollbackGetsTheSameSession: a top-up whose
// transaction failed after Stripe made its Checkout Session recorded
// nothing; the retry (a new request, with a correlation id of its own,
// under the same Idempotency-Key) gets that same session from Stripe
// and records it once.
func TestTopupRetryAfterRollbackGetsTheSameSession(t *testing.T) {
	t.Parallel()
	k := newKeyed(t)
	ctx := context.Background()
	topup := endpointtest.Find(t, k.defs, api.EndpointBillingTopup)
	work, err := topup.Prepare(ctx, k.request(k.userID, api.RoleUser, "k-retry"), endpointtest.Body(api.TopupRequest{AmountMinor: 2500}))
	if err != nil || work == nil {
		t.Fatalf("prepare: %v", err)
	}
	var first string
	if err := pgx.BeginFunc(ctx, k.app, func(tx pgx.Tx) error {
		out, _, err := work(ctx, tx)
		if err != nil {
			return err
		}
		first = out.(*api.TopupResponse).SessionID
		return errors.New("the transaction fails after Stripe answered")
	}); first == "" {
		t.Fatalf("first attempt: %v", err)
	}
	if n := k.count(t, `SELECT count(*) FROM stripe_checkout_sessions`); n != 0 {
		t.Fatalf("sessions after the rolled back attempt: got %d; want 0", n)
	}
	resp, err := k.topup(t, k.userID, "k-retry", 2500)
	if err != nil {
		t.Fatal(err)
	}
	if resp.SessionID != first {
		t.Errorf("retry: got session %s; want the first attempt's %s", resp.SessionID, first)
	}
	if n := k.count(t, `SELECT count(*) FROM stripe_checkout_sessions WHERE id = $1`, first); n != 1 {
		t.Errorf("sessions %s recorded: got %d; want 1", first, n)
	}
}

// TestRefundStripeKeyIsTheCallersOwn: two admins refunding part of one
// top-up under the same Idempotency-Key make two refunds; one admin
// repeating it gets the first refund back.
func TestRefundStripeKeyIsTheCallersOwn(t *testing.T) {
	t.Parallel()
	k := newKeyed(t)
	ctx := context.Background()
	session, _ := k.paidTopup(t, 5000)
	refund := endpointtest.Find(t, k.defs, api.EndpointAdminRefund)
	admins := []string{ids.New(ids.User), ids.New(ids.User)}
	for _, a := range admins {
		storetest.User(t, k.owner, a, a+"@example.test", time.Now())
	}
	run := func(admin string) (*api.RefundResponse, error) {
		return endpointtest.Mutate[api.RefundResponse](ctx, k.mut, refund, k.request(admin, api.RoleAdmin, "refund-key"),
			api.RefundRequest{Topup: session, AmountMinor: 1000, Reason: "goodwill"})
	}
	first, err := run(admins[0])
	if err != nil {
		t.Fatalf("first admin: %v", err)
	}
	second, err := run(admins[1])
	if err != nil {
		t.Fatalf("second admin, with the first's key: %v", err)
	}
	again, err := run(admins[0])
	if err != nil {
		t.Fatalf("first admin again: %v", err)
	}
	if second.RefundID == first.RefundID || again.RefundID != first.RefundID || second.RemainingMinor != 3000 {
		t.Errorf("refunds: %s, then %s (%d left), then %s; want two refunds, 3000 left, the repeat the first",
			first.RefundID, second.RefundID, second.RemainingMinor, again.RefundID)
	}
	if n := k.count(t, `SELECT count(*) FROM stripe_refunds WHERE session_id = $1`, session); n != 2 {
		t.Errorf("refunds recorded: got %d; want 2", n)
	}
	if b := k.balance(t); b != 3000 {
		t.Errorf("balance: got %d; want 3000", b)
	}
}

// TestTopupAndRefundRefusedBeforeTheirTransaction: a top-up or refund
// with Stripe not configured, a top-up amount out of bounds, and a refund
// naming no top-up, of a negative amount or with control characters in
// its reason are refused before any transaction, so Stripe is asked
// nothing.
func TestTopupAndRefundRefusedBeforeTheirTransaction(t *testing.T) {
	t.Parallel()
	k := newKeyed(t)
	ctx := context.Background()
	off := payments.Endpoints(payments.Deps{DB: k.app, Payments: k.service(t, payments.Settings{})})
	for _, tc := range []struct {
		name string
		defs []endpoint.Def
		ep   string
		req  any
		want api.Code
	}{
		{"top-up, Stripe off", off, api.EndpointBillingTopup, api.TopupRequest{AmountMinor: 5000}, api.CodeUnavailable},
		{"refund, Stripe off", off, api.EndpointAdminRefund, api.RefundRequest{Topup: "cs_x"}, api.CodeUnavailable},
		{"top-up under the minimum", k.defs, api.EndpointBillingTopup, api.TopupRequest{AmountMinor: 1}, api.CodeInvalidArgument},
		{"refund of no top-up", k.defs, api.EndpointAdminRefund, api.RefundRequest{}, api.CodeInvalidArgument},
		{"refund negative", k.defs, api.EndpointAdminRefund, api.RefundRequest{Topup: "cs_x", AmountMinor: -1}, api.CodeInvalidArgument},
		{"refund reason", k.defs, api.EndpointAdminRefund, api.RefundRequest{Topup: "cs_x", Reason: "bad\x1b[2J"}, api.CodeInvalidArgument},
	} {
		work, err := endpointtest.Find(t, tc.defs, tc.ep).Prepare(ctx, k.request(k.userID, api.RoleAdmin, "k"), endpointtest.Body(tc.req))
		if work != nil || api.CodeOf(err) != tc.want {
			t.Errorf("%s: got work %v, error %v; want no work and %s", tc.name, work != nil, err, tc.want)
		}
	}
	if requests, _ := k.stripe.sent(); requests != 0 {
		t.Errorf("Stripe was sent %d requests; want none", requests)
	}
}
