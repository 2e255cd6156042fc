package obs_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// serve starts a Server on loopback until the test ends.
func serve(t *testing.T, cfg obs.Config) *obs.Server {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	srv, err := obs.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv
}

func TestReadyzFollowsChecks(t *testing.T) {
	srv := serve(t, obs.Config{})
	var broken atomic.Bool
	srv.AddCheck(obs.Check{Name: "always", Func: func(context.Context) error { return nil }},
		obs.Check{Name: "toggle", Func: func(context.Context) error {
			if broken.Load() {
				return errors.New("it broke\nbadly")
			}
			return nil
		}},
		// A check that hangs is cut off at the timeout, not waited for.
		obs.Check{Name: "slow", Func: func(ctx context.Context) error {
			if broken.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}})
	if code, body := obstest.Get(t, srv.URL()+obs.HealthzPath); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: got %d %q; want 200 ok", code, body)
	}
	if code, body := obstest.Get(t, srv.URL()+obs.ReadyzPath); code != 200 || body != "ok always\nok toggle\nok slow\n" {
		t.Fatalf("/readyz: got %d %q; want 200 and three oks", code, body)
	}
	broken.Store(true)
	code, body := obstest.Get(t, srv.URL()+obs.ReadyzPath)
	want := "ok always\nfail toggle: it broke badly\nfail slow: context deadline exceeded\n"
	if code != http.StatusServiceUnavailable || body != want {
		t.Fatalf("/readyz broken: got %d %q; want 503 %q", code, body, want)
	}
	// Liveness does not depend on readiness.
	if code, _ := obstest.Get(t, srv.URL()+obs.HealthzPath); code != 200 {
		t.Fatalf("/healthz while not ready: got %d; want 200", code)
	}
	broken.Store(false)
	if code, _ := obstest.Get(t, srv.URL()+obs.ReadyzPath); code != 200 {
		t.Fatalf("/readyz after: got %d; want 200", code)
	}
}

func TestNATSMetricsCountReconnects(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	ns := startNATS(t, opts)
	port := ns.Addr().(interface{ String() string }).String()
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reg := obs.NewRegistry()
	if err := obs.RegisterNATS(reg, "main", nc); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, obs.Config{Gatherer: reg, CheckTimeout: time.Second})
	srv.AddCheck(obs.NATSCheck("main", nc))

	metric := func(name string) float64 {
		fam := obstest.Scrape(t, srv.URL())[name]
		if fam == nil || len(fam.Metric) != 1 {
			t.Fatalf("metric %s: got %v; want one series", name, fam)
		}
		return obstest.Families{name: fam}.Value(name, "conn", "main")
	}
	fams := obstest.Scrape(t, srv.URL())
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("family %s missing", name)
		}
	}
	if got := metric("gpuaas_nats_reconnects_total"); got != 0 {
		t.Fatalf("reconnects: got %v; want 0", got)
	}
	if got := metric("gpuaas_nats_connected"); got != 1 {
		t.Fatalf("connected: got %v; want 1", got)
	}

	ns.Shutdown()
	ns.WaitForShutdown()
	testutil.Eventually(t, "the client to notice", func() bool { return !nc.IsConnected() })
	if got := metric("gpuaas_nats_connected"); got != 0 {
		t.Fatalf("connected while the server is down: got %v; want 0", got)
	}
	if code, body := obstest.Get(t, srv.URL()+obs.ReadyzPath); code != 503 || !strings.HasPrefix(body, "fail nats: main connection is") {
		t.Fatalf("/readyz while NATS is down: got %d %q; want 503 fail nats", code, body)
	}

	opts2 := *opts
	opts2.Port = portOf(t, port)
	startNATS(t, &opts2)
	testutil.Eventually(t, "the client to reconnect", nc.IsConnected)
	if got := metric("gpuaas_nats_reconnects_total"); got != 1 {
		t.Fatalf("reconnects after a restart: got %v; want 1", got)
	}
	if code, _ := obstest.Get(t, srv.URL()+obs.ReadyzPath); code != 200 {
		t.Fatalf("/readyz after NATS is back: got %d; want 200", code)
	}
}

func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns
}
