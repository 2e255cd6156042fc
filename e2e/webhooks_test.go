package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/webhooks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// hookReceiver records the deliveries a webhook receiver on loopback gets,
// each with whether its signature checked out.
type hookReceiver struct {
	mu     sync.Mutex
	secret string
	got    []hookDelivery
}

type hookDelivery struct {
	id, kind, subject string
	signed            bool
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body struct {
		ID, Kind, Subject string
	}
	_ = json.Unmarshal(b, &body)
	h.mu.Lock()
	defer h.mu.Unlock()
	err := webhooks.Verify(h.secret, r.Header.Get(webhooks.SignatureHeader), b, time.Now(), 5*time.Minute)
	h.got = append(h.got, hookDelivery{id: r.Header.Get(webhooks.DeliveryHeader), kind: body.Kind, subject: body.Subject,
		signed: err == nil && body.ID == r.Header.Get(webhooks.DeliveryHeader)})
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) deliveries() []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookDelivery(nil), h.got...)
}

// TestWebhooksInDev is webhooks' acceptance (docs/webhooks.md) through the
// built binary and `gpuaas dev`: a receiver on loopback (http, which dev
// allows) gets the alloc.state deliveries of a new allocation, signed;
// with the receiver down a test delivery goes dead after its attempts,
// `webhook deliveries --state dead` lists it with the error, and once the
// receiver is back `webhook retry` delivers it, once, with the same id.
func TestWebhooksInDev(t *testing.T) {
	dev, _ := loggedInDev(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	recv := &hookReceiver{}
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	// Bad input changes nothing.
	for _, bad := range [][]string{
		{"webhook", "add", "ftp://" + addr + "/hook", "--events", "alloc.state"},
		{"webhook", "add", "http://" + addr + "/hook", "--events", "alloc.exploded"},
	} {
		if r := dev.gpuaas(t, "", bad...); r.code != 7 || r.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want the invalid-argument exit code (7)", bad, r.code, r.stderr)
		}
	}
	var w api.Webhook
	dev.gpuaasJSON(t, &w, "webhook", "add", "http://"+addr+"/hook", "--events", "alloc.state", "--json", "id,url,events,secret")
	if w.ID == "" || !strings.HasPrefix(w.Secret, "whsec_") {
		t.Fatalf("webhook add: %+v; want an id and the secret", w)
	}
	recv.mu.Lock()
	recv.secret = w.Secret
	recv.mu.Unlock()
	var listed []api.Webhook
	dev.gpuaasJSON(t, &listed, "webhook", "list", "--json")
	if len(listed) != 1 || listed[0].ID != w.ID || listed[0].Secret != "" {
		t.Fatalf("webhook list: %+v; want the webhook without its secret", listed)
	}

	a := dev.createActive(t, "--sku", "h200-slice", "--gpus", "1")
	testutil.Eventually(t, "the allocation's alloc.state deliveries, signed", func() bool {
		active := false
		for _, d := range recv.deliveries() {
			if d.kind != api.EventAllocState || !d.signed {
				t.Fatalf("delivery %+v: want signed alloc.state only", d)
			}
			active = active || d.subject == a.ID
		}
		return active
	})

	// The receiver goes away: a test delivery is tried, then dead.
	_ = srv.Close()
	var d api.WebhookDelivery
	dev.gpuaasJSON(t, &d, "webhook", "test", w.ID, "--json", "id,state")
	testutil.EventuallyWithin(t, 2*time.Minute, "the test delivery dead, with its error", func() bool {
		var dead []api.WebhookDelivery
		dev.gpuaasJSON(t, &dead, "webhook", "deliveries", "--state", "dead", "--json")
		return len(dead) == 1 && dead[0].ID == d.ID && dead[0].LastError != ""
	})
	before := len(recv.deliveries())
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv2.Serve(ln2) }()
	t.Cleanup(func() { _ = srv2.Close() })
	if r := dev.gpuaas(t, "", "webhook", "retry", d.ID); r.code != 0 {
		t.Fatalf("webhook retry: exit %d %s", r.code, r.stderr)
	}
	testutil.Eventually(t, "the retried delivery delivered", func() bool {
		var done []api.WebhookDelivery
		dev.gpuaasJSON(t, &done, "webhook", "deliveries", "--webhook", w.ID, "--state", "delivered", "--json")
		for _, x := range done {
			if x.ID == d.ID {
				return true
			}
		}
		return false
	})
	var retried []hookDelivery
	for _, x := range recv.deliveries()[before:] {
		if x.id == d.ID {
			retried = append(retried, x)
		}
	}
	if len(retried) != 1 || !retried[0].signed || retried[0].kind != api.WebhookTestKind {
		t.Fatalf("after retry the receiver got %+v; want the test delivery once, signed", retried)
	}
	if r := dev.gpuaas(t, "", "webhook", "rm", w.ID); r.code != 0 {
		t.Fatalf("webhook rm: exit %d %s", r.code, r.stderr)
	}
}
