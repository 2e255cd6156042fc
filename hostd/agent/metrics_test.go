package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMetrics runs a provision through an agent serving /metrics and a
// controld serving its own, and scrapes both with Prometheus's parser:
// hostd's task duration and NATS connection, controld's task duration
// (from creation to the applied result), and hostd's /readyz.
func TestMetrics(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, MetricsAddr: "127.0.0.1:0",
		Hosts: controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, AutoApproveSlots: true}})
	admin := env.Client(env.AdminToken)
	a, err := agent.New(agent.Config{Server: env.NATSURL, StateDir: t.TempDir(), Token: enroll(t, admin, "node-m"),
		Env: &tasks.Env{}, Handlers: newFakeHost().registry(), Log: testutil.Logger(t), MetricsAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	url := a.MetricsURL()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	testutil.Eventually(t, "hostd ready", func() bool { code, _ := obstest.Get(t, url+obs.ReadyzPath); return code == 200 })
	if code, _ := obstest.Get(t, url+obs.HealthzPath); code != 200 {
		t.Fatalf("/healthz: got %d; want 200", code)
	}
	readyNode(t, admin, a.NodeID())

	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, admin, al.ID, api.AllocActive)
	hostd := obstest.Scrape(t, url)
	if got := hostd.Value("gpuaas_hostd_task_duration_seconds", "type", api.TaskVMProvision, "status", hostproto.TaskSucceeded); got != 1 {
		t.Errorf("hostd task_duration_seconds{vm_provision,succeeded} count: got %v; want 1", got)
	}
	if got := hostd.Value("gpuaas_hostd_tasks_running"); got != 0 {
		t.Errorf("hostd tasks_running: got %v; want 0", got)
	}
	if got := hostd.Value("gpuaas_nats_connected", "conn", "hostd"); got != 1 {
		t.Errorf("hostd nats_connected: got %v; want 1", got)
	}
	if hostd["gpuaas_nats_reconnects_total"] == nil {
		t.Error("hostd: gpuaas_nats_reconnects_total missing")
	}
	testutil.Eventually(t, "controld's task duration", func() bool {
		return obstest.Scrape(t, env.Server.MetricsURL()).Value("gpuaas_tasks_duration_seconds",
			"type", api.TaskVMProvision, "status", hostproto.TaskSucceeded) == 1
	})
}
