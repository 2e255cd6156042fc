package sshgate

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestHTTPSFrontUpgradeHandlerReturns: once an upgraded connection is
// switched, the front's handler returns (net/http frees the connection's
// goroutine and buffers) while the connection keeps echoing, its bytes
// still the allocation's activity; the login's end still closes it within
// the revocation deadline, and its stream leaves the pooled link when it
// ends. Not parallel: it counts the
// process's handler goroutines.
func TestHTTPSFrontUpgradeHandlerReturns(t *testing.T) {
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
	port, _ := renterServer(t)
	ex, err := u.client.ExposeCreate(t.Context(), api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	h1 := frontClient(t, ca, e.gw.HTTPSAddr().String(), false)
	const n = 3
	var socks []io.ReadWriteCloser
	for range n {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+ex.Host+".localhost/ws", nil)
		req.Header.Set("Authorization", "Bearer "+u.token)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := h1.Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		rw, ok := resp.Body.(io.ReadWriteCloser)
		if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
			t.Fatalf("got %s; want 101 and a two-way body", resp.Status)
		}
		t.Cleanup(func() { _ = rw.Close() })
		socks = append(socks, rw)
		echoOnce(t, rw, "before")
	}
	testutil.EventuallyWithin(t, 10*time.Second, "no front handler left running for the upgraded connections", func() bool {
		return upgradeHandlers() == 0
	})
	before := e.report(alloc)
	for _, s := range socks {
		echoOnce(t, s, "after the handler returned")
	}
	if got := e.report(alloc); !got.After(before) {
		t.Fatalf("after echoes on the taken-over sockets: last active %v; want after %v", got, before)
	}
	if got := e.gw.core.LinkStats(alloc).Channels; got != n {
		t.Fatalf("%d channels on the pooled links with %d sockets open; want %d", got, n, n)
	}

	start := time.Now()
	if _, err := u.client.Logout(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, s := range socks {
		ended := make(chan error, 1)
		go func() { _, err := s.Read(make([]byte, 1)); ended <- err }()
		select {
		case err := <-ended:
			t.Logf("socket %d ended %s after logout: %v", i, time.Since(start).Round(time.Millisecond), err)
		case <-time.After(time.Until(start.Add(revocationDeadline))):
			t.Fatalf("socket %d still open %s after logout", i, revocationDeadline)
		}
	}
	testutil.Eventually(t, "the sockets' streams released", func() bool { return e.gw.core.LinkStats(alloc).Channels == 0 })
}

// echoOnce has msg echoed by the renter's upgrade echo.
func echoOnce(t *testing.T, rw io.ReadWriter, msg string) {
	t.Helper()
	if _, err := io.WriteString(rw, msg); err != nil {
		t.Fatalf("send %q: %v", msg, err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(rw, got); err != nil || string(got) != msg {
		t.Fatalf("echo: %q, %v; want %q", got, err, msg)
	}
}

// upgradeHandlers counts the goroutines still in the front's handler
// for an upgraded connection.
func upgradeHandlers() int {
	k := 0
	for _, g := range goroutineStacks() {
		if strings.Contains(g, "httpfront.(*Server).serveAllowed") && strings.Contains(g, "handleUpgradeResponse") {
			k++
		}
	}
	return k
}

// TestHTTPSFrontUpgradeKeepsEarlyBytes: bytes a client sends right behind
// its upgrade request, before the 101 (in the same packet), reach the
// renter's server and are counted.
func TestHTTPSFrontUpgradeKeepsEarlyBytes(t *testing.T) {
	t.Parallel()
	ca, err := httpfront.LoadOrCreateDevCA(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{config: func(c *Config) {
		c.HTTPS = HTTPS{Listen: "127.0.0.1:0", Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now)}
	}})
	u := e.newUser()
	alloc := e.addAlloc(u)
	port, _ := renterServer(t)
	ex, err := u.client.ExposeCreate(t.Context(), api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	host := ex.Host + ".localhost"
	c, err := tls.Dial("tcp", e.gw.HTTPSAddr().String(), &tls.Config{RootCAs: pool, ServerName: host, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	m := e.gw.httpsMetrics(ex.Host)
	in0 := m.BytesIn()
	const early = "sent with the request"
	if _, err := fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n%s", host, u.token, early); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v; want 101", resp, err)
	}
	got := make([]byte, len(early))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != early {
		t.Fatalf("echo of the early bytes: %q, %v; want %q", got, err, early)
	}
	testutil.EventuallyWithin(t, 5*time.Second, "the early bytes counted", func() bool { return m.BytesIn()-in0 == int64(len(early)) })
}
