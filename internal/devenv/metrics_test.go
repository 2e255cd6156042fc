package devenv_test

import (
	"net"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMetricsOnLoopback: `gpuaas dev` serves controld's and the gateway's
// /healthz, /readyz and /metrics on loopback ports of their own, ready
// once Start returns, and frees them on Close.
func TestMetricsOnLoopback(t *testing.T) {
	env := start(t, t.TempDir(), testutil.Postgres(t, controldtest.Template), 2, "")
	urls := []string{env.MetricsURL, env.GatewayMetricsURL}
	for _, u := range urls {
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Fatalf("metrics URL %q; want loopback", u)
		}
		testutil.Eventually(t, u+" ready", func() bool { code, _ := obstest.Get(t, u+obs.ReadyzPath); return code == 200 })
	}
	if got := obstest.Scrape(t, env.MetricsURL).Value("gpuaas_nodes", "state", "ready"); got != 2 {
		t.Errorf("controld gpuaas_nodes{state=ready}: got %v; want 2", got)
	}
	if fams := obstest.Scrape(t, env.GatewayMetricsURL); fams["gpuaas_ssh_sessions_active"] == nil {
		t.Error("gateway: gpuaas_ssh_sessions_active missing")
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	for _, u := range urls {
		l, err := net.Listen("tcp", strings.TrimPrefix(u, "http://"))
		if err != nil {
			t.Fatalf("after Close, %s is still taken: %v", u, err)
		}
		l.Close()
	}
}
