package controld_test

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/webhooks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// receiver is an HTTPS webhook receiver on loopback that verifies each
// delivery's signature and answers with status.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	status int
	got    []delivered
}

type delivered struct {
	id, kind string
	verr     error
	body     map[string]any
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{status: http.StatusNoContent}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		d := delivered{id: req.Header.Get(webhooks.DeliveryHeader), kind: req.Header.Get(webhooks.EventHeader),
			verr: webhooks.Verify(r.secret, req.Header.Get(webhooks.SignatureHeader), b, time.Now(), 5*time.Minute)}
		_ = json.Unmarshal(b, &d.body)
		r.got = append(r.got, d)
		w.WriteHeader(r.status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) set(secret string, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret, r.status = secret, status
}

func (r *receiver) deliveries() []delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivered(nil), r.got...)
}

// webhookEnv is a controld whose deliveries may reach the loopback
// receiver (an operator's AllowPrivate) and trust its certificate.
func webhookEnv(t *testing.T, r *receiver) *controldtest.Env {
	return controldtest.Start(t, controldtest.Options{MetricsAddr: "127.0.0.1:0", Webhooks: controld.WebhookConfig{
		Policy: webhooks.Policy{AllowPrivate: true}, RootCAs: certPool(r.srv),
		Backoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, MaxAttempts: 3, Interval: 50 * time.Millisecond}})
}

func certPool(srv *httptest.Server) *x509.CertPool {
	return srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
}

func TestWebhookDeliversSignedAllocState(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	env := webhookEnv(t, r)
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	w, err := admin.WebhookAdd(ctx, api.WebhookAddRequest{URL: r.srv.URL + "/hook", Events: []string{api.EventAllocState}})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Secret) < 40 {
		t.Fatalf("secret %q: want a fresh secret in the reply", w.Secret)
	}
	r.set(w.Secret, http.StatusOK)
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got delivered
	testutil.Eventually(t, "an alloc.state delivery of the allocation", func() bool {
		for _, d := range r.deliveries() {
			if d.kind == api.EventAllocState && d.body["subject"] == a.ID {
				got = d
				return true
			}
		}
		return false
	})
	if got.verr != nil {
		t.Errorf("signature: %v", got.verr)
	}
	if got.body["id"] != got.id || got.body["project_id"] != env.Project.ID {
		t.Errorf("body %v (delivery header %s): want the delivery id and the project", got.body, got.id)
	}
	// The listing no longer shows the secret; other kinds are not sent.
	l, err := admin.WebhookList(ctx, api.WebhookListRequest{})
	if err != nil || len(l.Webhooks) != 1 || l.Webhooks[0].Secret != "" {
		t.Fatalf("list: %+v, %v; want the webhook without its secret", l, err)
	}
	for _, d := range r.deliveries() {
		if d.kind != api.EventAllocState {
			t.Errorf("delivery of %s: not subscribed", d.kind)
		}
	}
}

func TestWebhookRetriesThenDeadThenRetryDeliversOnce(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	env := webhookEnv(t, r)
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	w, err := admin.WebhookAdd(ctx, api.WebhookAddRequest{URL: r.srv.URL, Events: []string{api.EventAllocState}})
	if err != nil {
		t.Fatal(err)
	}
	r.set(w.Secret, http.StatusServiceUnavailable)
	d, err := admin.WebhookTest(ctx, api.WebhookRef{ID: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	var dead api.WebhookDelivery
	testutil.Eventually(t, "the delivery dead after its attempts", func() bool {
		l, err := admin.WebhookDeliveries(ctx, api.WebhookDeliveriesRequest{Webhook: w.ID, State: api.DeliveryDead})
		if err != nil || len(l.Deliveries) != 1 {
			return false
		}
		dead = l.Deliveries[0]
		return true
	})
	if dead.ID != d.ID || dead.Attempts != 3 || dead.LastStatus != http.StatusServiceUnavailable || dead.LastError == "" {
		t.Fatalf("dead delivery %+v: want %s after 3 attempts with the receiver's answer", dead, d.ID)
	}
	if n := len(r.deliveries()); n != 3 {
		t.Fatalf("receiver saw %d attempts; want 3", n)
	}
	if got := obstest.Scrape(t, env.Server.MetricsURL()).Value("gpuaas_webhook_deliveries", "state", "dead"); got != 1 {
		t.Fatalf("gpuaas_webhook_deliveries{state=dead}: got %v; want 1", got)
	}
	r.set(w.Secret, http.StatusOK)
	if _, err := admin.WebhookRetry(ctx, api.WebhookDeliveryRef{ID: d.ID}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the retried delivery delivered", func() bool {
		l, err := admin.WebhookDeliveries(ctx, api.WebhookDeliveriesRequest{Webhook: w.ID, State: api.DeliveryDelivered})
		return err == nil && len(l.Deliveries) == 1
	})
	got := r.deliveries()
	if len(got) != 4 || got[3].id != d.ID || got[3].verr != nil || got[3].kind != api.WebhookTestKind {
		t.Fatalf("receiver saw %+v; want the same delivery id a fourth time, signed", got)
	}
	if _, err := admin.WebhookRetry(ctx, api.WebhookDeliveryRef{ID: d.ID}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("retry of a delivered delivery: %v; want conflict", err)
	}
}

func TestWebhookDialRefusesPrivateAddressesOfNames(t *testing.T) {
	t.Parallel()
	// The default policy: a name that resolves to loopback is refused when
	// the delivery connects (the URL is stored past the edge check, as a
	// public name whose DNS later points inside would be).
	env := controldtest.Start(t, controldtest.Options{Webhooks: controld.WebhookConfig{
		Backoff: 50 * time.Millisecond, MaxAttempts: 1, Interval: 50 * time.Millisecond}})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	w, err := webhooks.Add(ctx, env.Server.Pool(), env.Project.ID, "https://localhost:1/hook", []string{api.EventAllocState},
		env.Admin.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.WebhookTest(ctx, api.WebhookRef{ID: w.ID}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the delivery dead, refused by the dialer", func() bool {
		l, err := admin.WebhookDeliveries(ctx, api.WebhookDeliveriesRequest{Webhook: w.ID, State: api.DeliveryDead})
		return err == nil && len(l.Deliveries) == 1 && strings.Contains(l.Deliveries[0].LastError, "address not allowed")
	})
}
