package sshgate

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestHTTPSRequestsAreActivity is the exposure rule of docs/expose.md:
// requests through the HTTPS front count as the allocation's activity for
// idle release (gate.activity moves its last activity, as SSH channel
// data does), and a request the front refuses does not.
func TestHTTPSRequestsAreActivity(t *testing.T) {
	t.Parallel()
	ca, err := httpfront.LoadOrCreateDevCA(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{config: func(c *Config) {
		c.ActivityReportInterval = time.Hour // reported by e.report only
		c.HTTPS = HTTPS{Listen: "127.0.0.1:0", Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now)}
	}})
	u := e.newUser()
	alloc := e.addAlloc(u)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "renter") })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	ex, err := u.client.ExposeCreate(t.Context(), api.ExposeCreateRequest{Allocation: alloc, Port: ln.Addr().(*net.TCPAddr).Port, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://%s.localhost/", ex.Host)
	front := frontClient(t, ca, e.gw.HTTPSAddr().String(), false)

	before := e.report(alloc)
	if resp, _ := get(t, front, url, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no login: %s; want 401", resp.Status)
	}
	if got := e.report(alloc); !got.Equal(before) {
		t.Fatalf("after a refused request: last active %v; want it unchanged at %v", got, before)
	}
	if resp, body := get(t, front, url, u.token); resp.StatusCode != http.StatusOK || body != "renter" {
		t.Fatalf("the owner's request: %s %q; want 200 renter", resp.Status, body)
	}
	first := e.report(alloc)
	if !first.After(before) {
		t.Fatalf("after a request through the front: last active %v; want after %v", first, before)
	}
	if resp, _ := get(t, front, url, u.token); resp.StatusCode != http.StatusOK {
		t.Fatalf("a second request: %s", resp.Status)
	}
	if got := e.report(alloc); !got.After(first) {
		t.Fatalf("after a second request: last active %v; want after %v", got, first)
	}
}
