package sshgate

import (
	"net/http"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestHTTPSFrontRateLimit: past an exposure's burst the front answers 429
// with Retry-After, without asking controld or the node, and counts it.
func TestHTTPSFrontRateLimit(t *testing.T) {
	t.Parallel()
	ca, err := httpfront.LoadOrCreateDevCA(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{config: func(c *Config) {
		c.HTTPS = HTTPS{Listen: "127.0.0.1:0", Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now),
			RatePerExposure: 0.001, RatePerSource: 1000, Burst: 2}
	}})
	u := e.newUser()
	alloc := e.addAlloc(u)
	port, _ := renterServer(t)
	ex, err := u.client.ExposeCreate(t.Context(), api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.SharePublic, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	c := frontClient(t, ca, e.gw.HTTPSAddr().String(), true)
	url := "https://" + ex.Host + ".localhost/"
	for i := range 2 {
		if resp, body := get(t, c, url, ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d within the burst: got %s %q; want 200", i, resp.Status, body)
		}
	}
	resp, _ := get(t, c, url, "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past the burst: got %s (Retry-After %q); want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if m := e.gw.httpsMetrics(ex.Host); m.Limited() != 1 || m.Requests() != 2 {
		t.Errorf("metrics: %d limited, %d proxied; want 1 and 2", m.Limited(), m.Requests())
	}
}
