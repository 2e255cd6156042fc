package controld_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/pgserver"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// controldFamilies are the metric families controld exports; the alert
// rules in packaging/prometheus name only these (see packaging's test).
var controldFamilies = []string{
	"gpuaas_api_request_duration_seconds", "gpuaas_api_request_errors_total",
	"gpuaas_outbox_events", "gpuaas_outbox_relay_held", "gpuaas_tasks_open", "gpuaas_tasks_duration_seconds",
	"gpuaas_nodes", "gpuaas_billing_accrual_lag_seconds", "gpuaas_billing_window_seconds",
	"gpuaas_nats_reconnects_total", "gpuaas_nats_connected", "go_goroutines", "process_resident_memory_bytes",
	"gpuaas_api_replies_refused_total", "gpuaas_jetstream_stream_bytes", "gpuaas_jetstream_stream_max_bytes",
	"gpuaas_jetstream_stream_messages", "gpuaas_webhook_deliveries",
}

// TestMetricsMove scrapes controld's /metrics with Prometheus's parser:
// every family is there, a request adds to its endpoint's histogram, an
// error reply to its endpoint's errors by code, and the Postgres gauges
// read the database. (Task durations move in cli/daemon's dev test, where
// sim hosts settle tasks.)
func TestMetricsMove(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{MetricsAddr: "127.0.0.1:0"})
	ctx := t.Context()
	url := env.Server.MetricsURL()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("MetricsURL: got %q; want loopback", url)
	}
	before := obstest.Scrape(t, url)
	var missing []string
	for _, name := range controldFamilies {
		if name == "gpuaas_api_request_errors_total" || name == "gpuaas_tasks_duration_seconds" {
			continue // vectors with no series until something happens
		}
		if before[name] == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("families missing from /metrics: %v", missing)
	}
	if got := before.Value("gpuaas_nodes", "state", "ready"); got != 2 {
		t.Errorf("gpuaas_nodes{state=ready}: got %v; want 2 (the seeded fleet)", got)
	}
	if got := before.Value("gpuaas_nats_connected", "conn", "controld"); got != 1 {
		t.Errorf("gpuaas_nats_connected: got %v; want 1", got)
	}
	if got := before.Value("gpuaas_billing_window_seconds"); got != 60 {
		t.Errorf("gpuaas_billing_window_seconds: got %v; want 60", got)
	}

	admin := env.Client(env.AdminToken)
	for range 3 {
		if _, err := admin.CatalogList(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.NodeGet(ctx, "no-such-node"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("node.get of an unknown node: got %v; want not_found", err)
	}
	after := obstest.Scrape(t, url)
	steps := []struct {
		name   string
		labels []string
		want   float64 // added since before
	}{
		{"gpuaas_api_request_duration_seconds", []string{"endpoint", api.EndpointCatalogList}, 3},
		{"gpuaas_api_request_duration_seconds", []string{"endpoint", api.EndpointNodeGet}, 1},
		{"gpuaas_api_request_errors_total", []string{"endpoint", api.EndpointNodeGet, "code", string(api.CodeNotFound)}, 1},
		{"gpuaas_api_request_errors_total", []string{"endpoint", api.EndpointCatalogList}, 0},
	}
	for _, st := range steps {
		b := max(before.Value(st.name, st.labels...), 0)
		a := max(after.Value(st.name, st.labels...), 0)
		if a-b != st.want {
			t.Errorf("%s%v: went from %v to %v; want +%v", st.name, st.labels, b, a, st.want)
		}
	}

}

// privatePostgres starts a cluster of the test's own, which it may stop.
func privatePostgres(t *testing.T) (pgserver.Config, *pgserver.Server) {
	t.Helper()
	parent, err := os.MkdirTemp("", "gpuaas-readyz-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil { // postgres's OS user must reach it
		t.Fatal(err)
	}
	cfg := pgserver.Config{DataDir: filepath.Join(parent, "pg"), Logger: slog.New(slog.DiscardHandler),
		Settings: map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "shared_buffers": "16MB"}}
	srv, err := pgserver.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, srv
}

// TestReadyzFollowsPostgres stops controld's Postgres: /readyz turns 503
// naming postgres while /healthz stays 200, and both are 200 again once
// Postgres is back, without restarting controld.
func TestReadyzFollowsPostgres(t *testing.T) {
	t.Parallel()
	pgCfg, pg := privatePostgres(t)
	current := pg
	t.Cleanup(func() { _ = current.Stop(context.Background()) })
	env := controldtest.Start(t, controldtest.Options{DSN: pg.ConnString("postgres"), MetricsAddr: "127.0.0.1:0", NoNodes: true})
	url := env.Server.MetricsURL()
	ready := func() (int, string) { return obstest.Get(t, url+obs.ReadyzPath) }
	testutil.Eventually(t, "controld ready", func() bool { code, _ := ready(); return code == 200 })
	if _, body := ready(); body != "ok postgres\nok nats\nok serving\nok migrations\nok singletons\n" {
		t.Fatalf("/readyz: got %q; want the five checks ok", body)
	}

	if err := pg.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "/readyz to fail on postgres", func() bool {
		code, body := ready()
		return code == 503 && strings.HasPrefix(body, "fail postgres: ")
	})
	if code, _ := obstest.Get(t, url+obs.HealthzPath); code != 200 {
		t.Fatalf("/healthz while Postgres is down: got %d; want 200 (alive, not ready)", code)
	}
	restart := time.Now()
	restarted, err := pgserver.Start(t.Context(), pgCfg)
	if err != nil {
		t.Fatal(err)
	}
	current = restarted
	testutil.Eventually(t, "/readyz ok again", func() bool { code, _ := ready(); return code == 200 })
	t.Logf("ready again %v after Postgres was started again", time.Since(restart).Round(time.Millisecond))
	if _, err := env.Client(env.AdminToken).CatalogList(t.Context()); err != nil {
		t.Fatalf("API after Postgres came back: %v", err)
	}
}
