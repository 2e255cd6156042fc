package sshgate

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestHTTPSFrontUpgradeBytes: the bytes of an upgraded connection (what a
// WebSocket is on the wire) count in the exposure's metrics, both ways;
// before, only plain request and response bodies did.
func TestHTTPSFrontUpgradeBytes(t *testing.T) {
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
	ctx := t.Context()
	ex, err := u.client.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	h1 := frontClient(t, ca, e.gw.HTTPSAddr().String(), false)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ex.Host+".localhost/ws", nil)
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := h1.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rw, ok := resp.Body.(io.ReadWriter)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		t.Fatalf("got %s; want 101 and a two-way body", resp.Status)
	}
	m := e.gw.httpsMetrics(ex.Host)
	in0, out0 := m.BytesIn(), m.BytesOut()
	const size = 64 << 10
	payload := bytes.Repeat([]byte("websocket frame "), size/16)
	go func() { _, _ = rw.Write(payload) }()
	got := make([]byte, size)
	if _, err := io.ReadFull(rw, got); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo of %d bytes: %v", size, err)
	}
	testutil.EventuallyWithin(t, 5*time.Second, "the upgraded connection's bytes counted", func() bool {
		return m.BytesIn()-in0 == size && m.BytesOut()-out0 == size
	})
}
