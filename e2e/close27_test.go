package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/webhooks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// docSignatureOK checks a delivery's signature as docs/webhooks.md
// ("Checking the signature") tells receivers to, written out here rather
// than through webhooks.Verify, so the documented scheme is what is
// tested: HMAC-SHA256 keyed with the secret over "<t>.<raw body>", hex,
// in "t=<unix seconds>,v1=<hex>", the timestamp within five minutes.
func docSignatureOK(secret, header string, body []byte) bool {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		if k, v, ok := strings.Cut(part, "="); ok && k == "t" {
			ts = v
		} else if ok && k == "v1" {
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || math.Abs(time.Since(time.Unix(sec, 0)).Seconds()) > 300 {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return hmac.Equal([]byte(sig), []byte(hex.EncodeToString(m.Sum(nil))))
}

// tlsReceiver is a webhook receiver served over HTTPS with a test CA's
// certificate for 127.0.0.1, recording each delivery and whether its
// signature checks out by the documented scheme.
type tlsReceiver struct {
	mu     sync.Mutex
	secret string
	got    []hookDelivery
}

func (h *tlsReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body struct{ ID, Kind, Subject string }
	_ = json.Unmarshal(b, &body)
	h.mu.Lock()
	defer h.mu.Unlock()
	id := r.Header.Get(webhooks.DeliveryHeader)
	h.got = append(h.got, hookDelivery{id: id, kind: body.Kind, subject: body.Subject,
		signed: r.TLS != nil && body.ID == id && docSignatureOK(h.secret, r.Header.Get("Gpuaas-Signature"), b)})
	w.WriteHeader(http.StatusNoContent)
}

func (h *tlsReceiver) deliveries() []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookDelivery(nil), h.got...)
}

// serveTLS serves h over HTTPS on ln with files' certificate until the
// returned server is closed (or the test ends).
func serveTLS(t *testing.T, ln net.Listener, h http.Handler, files testutil.TLSFiles) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ServeTLS(ln, files.CertFile, files.KeyFile) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// TestWebhooksHTTPSInDev is webhooks' acceptance with an HTTPS receiver,
// through the built binary: `gpuaas dev --webhook-ca-file` trusts the
// receiver's own CA (docs/webhooks.md), `gpuaas webhook add
// https://127.0.0.1:PORT/hook` gets the alloc.state deliveries of a new
// allocation over TLS, each signed as the docs say; with the receiver
// down a delivery is retried, then dead and listed so by `webhook
// deliveries --state dead`; back up, `webhook retry` delivers it once.
func TestWebhooksHTTPSInDev(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	files := testutil.TLS(t)
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--webhook-ca-file", files.CAFile)
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	recv := &tlsReceiver{}
	srv := serveTLS(t, ln, recv, files)

	var w api.Webhook
	dev.gpuaasJSON(t, &w, "webhook", "add", "https://"+addr+"/hook", "--events", "alloc.state", "--json", "id,url,events,secret")
	if w.ID == "" || w.Secret == "" {
		t.Fatalf("webhook add: %+v; want an id and the secret", w)
	}
	recv.mu.Lock()
	recv.secret = w.Secret
	recv.mu.Unlock()

	a := dev.createActive(t, "--sku", "h200-slice", "--gpus", "1")
	testutil.Eventually(t, "the allocation's alloc.state deliveries over HTTPS, signed", func() bool {
		active := false
		for _, d := range recv.deliveries() {
			if d.kind != api.EventAllocState || !d.signed {
				t.Fatalf("delivery %+v: want alloc.state only, over TLS, its signature valid by docs/webhooks.md", d)
			}
			active = active || d.subject == a.ID
		}
		return active
	})

	// The receiver goes away: a test delivery is retried, then dead.
	_ = srv.Close()
	var d api.WebhookDelivery
	dev.gpuaasJSON(t, &d, "webhook", "test", w.ID, "--json", "id,state")
	testutil.EventuallyWithin(t, 2*time.Minute, "the test delivery dead after its attempts, with its error", func() bool {
		var dead []api.WebhookDelivery
		dev.gpuaasJSON(t, &dead, "webhook", "deliveries", "--state", "dead", "--json")
		return len(dead) == 1 && dead[0].ID == d.ID && dead[0].LastError != "" && dead[0].Attempts > 1
	})
	before := len(recv.deliveries())
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	serveTLS(t, ln2, recv, files)
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
}

// TestExposeACMEInDev is the gateway's ACME through the built binary, and
// the refusal of another project's allocation through the CLI:
//   - `gpuaas dev --https-acme-ca <Pebble> --https-acme-ca-root` (the
//     gateway's --https-acme-ca, docs/expose.md): a renter's exposure gets
//     its certificate from Pebble at the first handshake, validated by
//     TLS-ALPN-01 on the front's port, and a client trusting only Pebble's
//     root loads the renter's page;
//   - eve, a user of another project, runs `gpuaas expose <dev's
//     allocation> PORT`: refused as not found (exit 6, naming the
//     allocation), and neither her project nor dev has an exposure.
func TestExposeACMEInDev(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpsPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	pebble := testutil.StartPebble(t, testutil.PebbleOptions{TLSPort: httpsPort, Validity: 24 * time.Hour})
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--https-port", strconv.Itoa(httpsPort),
		"--https-acme-ca", pebble.Directory, "--https-acme-ca-root", pebble.CAFile)
	// The banner's lines follow its first one, which startDev waits for.
	testutil.Eventually(t, "the banner to say where certificates come from", func() bool {
		return strings.Contains(dev.stderr.String(), "certificates from "+pebble.Directory)
	})
	run := func(args ...string) result {
		t.Helper()
		r := dev.gpuaas(t, "", args...)
		if r.code != 0 {
			t.Fatalf("gpuaas %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r
	}
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	a := dev.createActive(t, "--sku", "h100-baremetal")
	port := renterServerOverSSH(t, cfg, a.ID)

	t.Run("another project's allocation", func(t *testing.T) {
		invite := strings.TrimSpace(run("admin", "user", "add", "eve@example.com", "--json", "invite", "--jq", ".invite.code").stdout)
		run("context", "add", "eve", "--server", devServer(t, dev))
		if r := dev.gpuaas(t, "eve's password\n", "--context", "eve", "login", "--invite", invite, "--password-stdin"); r.code != 0 {
			t.Fatalf("eve's login: exit %d %s", r.code, r.stderr)
		}
		run("--context", "eve", "project", "create", "eve-lab")
		r := dev.gpuaas(t, "", "--context", "eve", "expose", a.ID, strconv.Itoa(port), "--share", "public")
		if r.code != 6 || !strings.Contains(r.stderr, a.ID) || !strings.Contains(r.stderr, "not found") {
			t.Fatalf("eve exposes dev's allocation: exit %d, stderr %q; want 6 (not found) naming %s", r.code, r.stderr, a.ID)
		}
		for _, who := range [][]string{{"--context", "eve"}, nil} {
			if n := strings.TrimSpace(run(append(who, "expose", "list", "--json", "id", "--jq", "length")...).stdout); n != "0" {
				t.Fatalf("expose list %v after the refusal: %s exposures; want 0", who, n)
			}
		}
	})

	url := strings.TrimSpace(run("expose", a.ID, strconv.Itoa(port), "--share", "public", "--json", "url", "--jq", ".url").stdout)
	host := strings.TrimPrefix(url, "https://")
	host, _, _ = strings.Cut(host, ":")
	if want := api.ExposureHost(a.ID, port) + ".localhost"; host != want {
		t.Fatalf("expose printed %q; want https://%s:PORT", url, want)
	}
	rootPEM, err := pebble.Root()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootPEM) {
		t.Fatalf("pebble root: %q", rootPEM)
	}
	front := net.JoinHostPort("127.0.0.1", strconv.Itoa(httpsPort))
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, front)
		}}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get(url + "/")
	if err != nil {
		t.Fatalf("GET %s trusting only Pebble's root: %v\npebble:\n%s", url, err, pebble.Log())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "renter-page") {
		t.Fatalf("GET %s: %s %q; want the renter's page", url, resp.Status, body)
	}
	if names := resp.TLS.PeerCertificates[0].DNSNames; len(names) != 1 || names[0] != host {
		t.Fatalf("certificate names %v; want [%s]", names, host)
	}
	if q := pebble.Queried(); !slices.Contains(q, host) {
		t.Fatalf("pebble resolved %v; want %s (its TLS-ALPN-01 validation)", q, host)
	}
}

// renterServerOverSSH starts python's http.server serving "renter-page"
// on a free loopback port of allocation id (a sim bare-metal one, which
// shares this machine's loopback), over ssh as the renter, and returns
// the port once it listens.
func renterServerOverSSH(t *testing.T, cfg, id string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// setsid -f: the server leaves the session, which ends at once.
	if out, code := openssh(t, "ssh", "-F", filepath.Join(cfg, "ssh", "dev", "config"), id+"@localhost",
		fmt.Sprintf("mkdir -p site && echo renter-page > site/index.html && cd site && setsid -f /usr/bin/python3 -m http.server %d --bind 127.0.0.1 </dev/null >/dev/null 2>&1", port)); code != 0 {
		t.Fatalf("start the server over ssh: exit %d %s", code, out)
	}
	testutil.EventuallyWithin(t, time.Minute, "the renter's server to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return port
}
