package sshgate

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMetrics scrapes the gateway's /metrics with Prometheus's parser
// while a session is open and after it ended: sessions_active follows
// it, sessions_total counts it by kind and bytes_total adds its bytes.
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) { c.MetricsAddr = "127.0.0.1:0" }})
	url := e.gw.MetricsURL()
	if code, body := obstest.Get(t, url+obs.ReadyzPath); code != 200 || body != "ok nats\nok ssh\n" {
		t.Fatalf("/readyz: got %d %q; want 200, nats and ssh ok", code, body)
	}
	before := obstest.Scrape(t, url)
	for _, name := range []string{"gpuaas_ssh_sessions_active", "gpuaas_ssh_bytes_total", "gpuaas_nats_reconnects_total", "gpuaas_nats_connected"} {
		if before[name] == nil {
			t.Errorf("family %s missing", name)
		}
	}
	if got := before.Value("gpuaas_ssh_sessions_active"); got != 0 {
		t.Fatalf("sessions_active before: got %v; want 0", got)
	}

	u := e.newUser()
	c := e.dial(u, e.addAlloc(u))
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.Stdout = &out
	stdin, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("cat"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "one active session", func() bool {
		return obstest.Scrape(t, url).Value("gpuaas_ssh_sessions_active") == 1
	})
	payload := strings.Repeat("metrics ", 512) // 4 KiB each way
	if _, err := stdin.Write([]byte(payload)); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	if out.String() != payload {
		t.Fatalf("cat echoed %d bytes; want %d", out.Len(), len(payload))
	}
	testutil.Eventually(t, "the session ended in the metrics", func() bool {
		return obstest.Scrape(t, url).Value("gpuaas_ssh_sessions_active") == 0
	})
	after := obstest.Scrape(t, url)
	if got := after.Value("gpuaas_ssh_sessions_total", "kind", api.SessionExec); got != 1 {
		t.Errorf("sessions_total{kind=exec}: got %v; want 1", got)
	}
	if got := after.Value("gpuaas_ssh_bytes_total"); got < float64(2*len(payload)) {
		t.Errorf("bytes_total: got %v; want at least %d (the payload both ways)", got, 2*len(payload))
	}
}

// TestRunFailingAtStartupWithMetricsReturns is the regression test of
// devenv's "ssh gateway did not start": with a metrics server, a Run
// that failed at start-up waited for its context to end before returning
// its error (it waited for the metrics server, which stopped only then),
// so the caller saw a silent hang instead of the error. Run on a listener
// (RunOn, as devenv does) releases it.
func TestRunFailingAtStartupWithMetricsReturns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "host_ed25519_key")
	if _, err := loadOrCreateHostKey(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // refused: Run fails before dialling anything
		t.Fatal(err)
	}
	gw, err := New(Config{Listen: "127.0.0.1:0", HostKeyPath: path, GatewayKey: sshtest.NewKey(t),
		Client: &api.Client{}, MetricsAddr: "127.0.0.1:0", Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- gw.RunOn(ctx, ln) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "host key") {
			t.Fatalf("Run returned %v; want the host key's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run failed at start-up but did not return while its context was live")
	}
	if resp, err := http.Get(gw.MetricsURL() + obs.HealthzPath); err == nil {
		resp.Body.Close()
		t.Fatalf("/healthz answered %s after Run returned; want the metrics server stopped", resp.Status)
	}
	again, err := net.Listen("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("the listener Run was given is still held after it failed: %v", err)
	}
	again.Close()
}
