package payments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("payments", store.Migrate)

const (
	testSecretKey     = "sk_test_gpuaas"
	testWebhookSecret = "whsec_gpuaas_test"
)

// start is far from the wall clock, so that anything reading the wall
// clock instead of the injected one (stripe-go's own tolerance check)
// would refuse every delivery.
var start = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// fixture is a test database (acting as controld's app role), a user
// owning a project, a real stripe-mock and a Service wired to both with a
// settable clock; webhook is the Service's handler on a loopback HTTP
// server.
type fixture struct {
	owner, app *pgxpool.Pool
	clock      *testutil.Clock
	svc        *payments.Service
	userID     string
	projectID  string
	webhook    string
	mut        *mutate.Runner
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	dsn := testutil.Postgres(t, pgTemplate)
	owner, err := store.Open(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	app, err := store.OpenAs(ctx, dsn, 32, store.AppRole)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	f := &fixture{owner: owner, app: app, clock: testutil.NewClock(start),
		userID: ids.New(ids.User), projectID: ids.New(ids.Project)}
	now := time.Now()
	storetest.User(t, owner, f.userID, f.userID+"@example.test", now)
	storetest.Project(t, owner, f.projectID, f.projectID, f.userID, now)
	storetest.Member(t, owner, f.projectID, f.userID, api.ProjectOwner, now)
	f.svc = f.service(t, payments.Settings{APIBase: testutil.StripeMock(t), SecretKey: testSecretKey,
		WebhookSecret: testWebhookSecret, SuccessURL: "http://127.0.0.1/done", CancelURL: "http://127.0.0.1/cancelled"})
	srv := httptest.NewServer(f.svc.WebhookHandler())
	t.Cleanup(srv.Close)
	f.webhook = srv.URL
	f.mut = &mutate.Runner{Pool: app, Now: f.clock.Now}
	return f
}

func (f *fixture) service(t testing.TB, s payments.Settings) *payments.Service {
	t.Helper()
	svc, err := payments.New(payments.Config{Settings: s, Pool: f.app, Now: f.clock.Now, Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// checkout creates a top-up of amount at stripe-mock through svc.
func (f *fixture) checkout(t testing.TB, svc *payments.Service, amount int64) (api.TopupResponse, error) {
	t.Helper()
	var resp api.TopupResponse
	err := pgx.BeginFunc(context.Background(), f.app, func(tx pgx.Tx) (err error) {
		resp, err = svc.CreateCheckout(context.Background(), tx, payments.CheckoutInput{ProjectID: f.projectID,
			ProjectName: f.projectID, UserID: f.userID, AmountMinor: amount, RequestKey: ids.New("k")})
		return err
	})
	return resp, err
}

// paidTopup creates a top-up of amount and delivers its paid completion;
// it returns the session id and payment intent.
func (f *fixture) paidTopup(t testing.TB, amount int64) (string, string) {
	t.Helper()
	resp, err := f.checkout(t, f.svc, amount)
	if err != nil {
		t.Fatal(err)
	}
	pi := "pi_" + ids.New("t")
	payload := eventJSON(t, ids.New("evt"), "checkout.session.completed", sessionObject(resp.SessionID, f.projectID, amount, "paid", pi))
	if code, body := f.deliver(t, payload, f.sign(payload, f.clock.Now())); code != http.StatusOK {
		t.Fatalf("deliver completion: %d %s", code, body)
	}
	return resp.SessionID, pi
}

// sessionObject is a Checkout Session as Stripe renders it in an event.
func sessionObject(id, project string, amount int64, paymentStatus, pi string) map[string]any {
	return map[string]any{"id": id, "object": "checkout.session", "mode": "payment", "status": "complete",
		"payment_status": paymentStatus, "amount_total": amount, "currency": "usd", "client_reference_id": project,
		"payment_intent": pi, "metadata": map[string]string{"project_id": project}}
}

// eventJSON renders an event of the pinned API version, indented as
// Stripe sends them.
func eventJSON(t testing.TB, id, typ string, object map[string]any) []byte {
	t.Helper()
	return eventJSONVersion(t, id, typ, payments.APIVersion, object)
}

func eventJSONVersion(t testing.TB, id, typ, version string, object map[string]any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"id": id, "object": "event", "api_version": version, "created": start.Unix(),
		"livemode": false, "pending_webhooks": 1, "type": typ, "data": map[string]any{"object": object}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sign returns the Stripe-Signature header for payload signed at at.
func (f *fixture) sign(payload []byte, at time.Time) string {
	return signWith(payload, at, testWebhookSecret)
}

func signWith(payload []byte, at time.Time, secret string) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

// deliver POSTs a webhook delivery and returns the status and body.
func (f *fixture) deliver(t testing.TB, payload []byte, header string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.webhook, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	if header != "" {
		req.Header.Set("Stripe-Signature", header)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// count runs a count query.
func (f *fixture) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.owner.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// balance is the project's ledger balance.
func (f *fixture) balance(t testing.TB) int64 {
	t.Helper()
	var b int64
	if err := f.owner.QueryRow(context.Background(), `SELECT coalesce(sum(amount_minor), 0)::bigint FROM ledger_entries
		WHERE project_id = $1`, f.projectID).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

func outcomeOf(t testing.TB, body string) string {
	t.Helper()
	var r struct{ Outcome string }
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("reply %q: %v", body, err)
	}
	return r.Outcome
}
