package controld_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

const testWebhookSecret = "whsec_controld_test"

func stripeEnv(t *testing.T) *controldtest.Env {
	t.Helper()
	return controldtest.Start(t, controldtest.Options{NoNodes: true, Unfunded: true, HTTPAddr: "127.0.0.1:0",
		Stripe: payments.Settings{APIBase: testutil.StripeMock(t), SecretKey: "sk_test_controld",
			WebhookSecret: testWebhookSecret, SuccessURL: "http://127.0.0.1/done", CancelURL: "http://127.0.0.1/cancelled"}})
}

func TestBillingTopupEndToEnd(t *testing.T) {
	t.Parallel()
	env := stripeEnv(t)
	ctx := context.Background()
	admin := env.Client(env.AdminToken)
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	_, carolToken := env.AddUser(t, "carol@example.test", api.RoleUser)
	bob, carol := env.Client(bobToken), env.Client(carolToken)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: "carol@example.test", Role: api.ProjectViewer}); err != nil {
		t.Fatal(err)
	}

	key := api.WithIdempotencyKey("topup-1")
	resp, err := admin.BillingTopup(ctx, api.TopupRequest{AmountMinor: 5000}, key)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.SessionID, "cs_") || !strings.HasPrefix(resp.URL, "https://") || resp.ProjectID != env.Project.ID {
		t.Fatalf("got %+v", resp)
	}
	// A retry with the same key replays the answer; no second session.
	again, err := admin.BillingTopup(ctx, api.TopupRequest{AmountMinor: 5000}, key)
	if err != nil || *again != *resp {
		t.Fatalf("replay: %+v, %v; want %+v", again, err, resp)
	}
	if n := count(t, env, `SELECT count(*) FROM stripe_checkout_sessions`); n != 1 {
		t.Errorf("got %d sessions; want 1", n)
	}
	refusals := []struct {
		name   string
		client *api.Client
		req    api.TopupRequest
		want   error
	}{
		{"non-member", bob, api.TopupRequest{AmountMinor: 5000}, api.ErrNotFound},
		{"viewer", carol, api.TopupRequest{AmountMinor: 5000}, api.ErrForbidden},
		{"below the minimum", admin, api.TopupRequest{AmountMinor: 1}, api.ErrInvalidArgument},
		// No project named, and bob belongs to none, so has no default
		// project either (the admin's default, testproj, would be used).
		{"no project", env.Client(bobToken, api.WithProject("")), api.TopupRequest{AmountMinor: 5000}, api.ErrInvalidArgument},
	}
	for _, r := range refusals {
		if _, err := r.client.BillingTopup(ctx, r.req); !errors.Is(err, r.want) {
			t.Errorf("%s: got %v; want %v", r.name, err, r.want)
		}
	}
	if n := count(t, env, `SELECT count(*) FROM stripe_checkout_sessions`); n != 1 {
		t.Errorf("refused top-ups recorded sessions: got %d; want 1", n)
	}

	// Stripe reports the payment to controld's HTTP endpoint.
	payload, _ := json.MarshalIndent(map[string]any{"id": "evt_controld_1", "object": "event", "api_version": payments.APIVersion,
		"type": "checkout.session.completed", "data": map[string]any{"object": map[string]any{
			"id": resp.SessionID, "object": "checkout.session", "payment_status": "paid", "amount_total": 5000,
			"currency": "usd", "client_reference_id": env.Project.ID, "payment_intent": "pi_controld_1"}}}, "", "  ")
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: testWebhookSecret, Timestamp: time.Now()})
	url := "http://" + env.Server.HTTPAddr() + controld.StripeWebhookPath
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
		req.Header.Set("Stripe-Signature", signed.Header)
		hr, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		hr.Body.Close()
		if hr.StatusCode != http.StatusOK {
			t.Fatalf("webhook: got %s; want 200", hr.Status)
		}
	}
	if n := count(t, env, `SELECT count(*) FROM ledger_entries WHERE project_id = $1 AND kind = 'topup' AND amount_minor = 5000`, env.Project.ID); n != 1 {
		t.Fatalf("got %d top-up entries; want 1", n)
	}

	// Admins refund and adjust; users may not.
	if _, err := bob.AdminRefund(ctx, api.RefundRequest{Topup: resp.SessionID}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("user refund: got %v; want forbidden", err)
	}
	r, err := admin.AdminRefund(ctx, api.RefundRequest{Topup: resp.SessionID, AmountMinor: 1000, Reason: "test"})
	if err != nil || r.AmountMinor != 1000 || r.RemainingMinor != 4000 {
		t.Fatalf("refund: %+v, %v", r, err)
	}
	if _, err := bob.AdminCredit(ctx, api.CreditRequest{Project: env.Project.Name, AmountMinor: 100, Reason: "x"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("user credit: got %v; want forbidden", err)
	}
	if _, err := admin.AdminCredit(ctx, api.CreditRequest{Project: env.Project.Name, AmountMinor: 100}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("credit without a reason: got %v; want invalid_argument", err)
	}
	if _, err := admin.AdminCredit(ctx, api.CreditRequest{Project: "no-such-project", AmountMinor: 100, Reason: "x"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("credit of an unknown project: got %v; want not_found", err)
	}
	c, err := admin.AdminCredit(ctx, api.CreditRequest{Project: env.Project.Name, AmountMinor: 250, Reason: "outage"})
	if err != nil || c.BalanceMinor != 4250 {
		t.Fatalf("credit: %+v, %v; want balance 4250", c, err)
	}
	for _, action := range []string{api.EndpointBillingTopup, api.EndpointAdminRefund, api.EndpointAdminCredit} {
		if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = $1 AND actor_id = $2`, action, env.Admin.ID); n != 1 {
			t.Errorf("%s: got %d audit rows by the admin; want 1", action, n)
		}
	}
}

func TestBillingTopupWithoutStripeIsUnavailable(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	if env.Server.HTTPAddr() != "" {
		t.Errorf("HTTP server listening on %s without HTTPAddr", env.Server.HTTPAddr())
	}
	_, err := env.Client(env.AdminToken).BillingTopup(context.Background(), api.TopupRequest{AmountMinor: 5000})
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeUnavailable || !strings.Contains(e.Message, "Stripe is not configured") || e.Hint == "" {
		t.Fatalf("got %#v; want unavailable saying Stripe is not configured, with a hint", err)
	}
	if _, err := env.Client(env.AdminToken).AdminRefund(context.Background(), api.RefundRequest{Topup: "cs_x"}); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("refund: got %v; want unavailable", err)
	}
}
