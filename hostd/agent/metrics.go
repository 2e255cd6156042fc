package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/internal/obs"
)

// agentMetrics are hostd's Prometheus metrics.
type agentMetrics struct {
	reg     *prometheus.Registry
	running prometheus.Gauge
	tasks   *prometheus.HistogramVec // type, status
	// gpuQueryFailures counts failed GPU telemetry reads (gpus.go).
	gpuQueryFailures prometheus.Counter
	// guestQueryFailures counts failed GPU reads in slice VMs (guestgpus.go).
	guestQueryFailures prometheus.Counter
}

func newAgentMetrics(gpus *gpuState) *agentMetrics {
	m := &agentMetrics{reg: obs.NewRegistry(),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "hostd",
			Name: "tasks_running", Help: "Tasks this node is running."}),
		tasks: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: obs.Namespace, Subsystem: "hostd",
			Name: "task_duration_seconds", Help: "Time this node took to run a task, by type and status.",
			Buckets: []float64{.1, .5, 1, 5, 10, 30, 60, 120, 300, 600, 1800}}, []string{"type", "status"}),
	}
	m.gpuQueryFailures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "hostd",
		Name: "gpu_query_failures_total", Help: "GPU telemetry reads (nvidia-smi) that failed."})
	m.guestQueryFailures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "hostd",
		Name: "guest_gpu_query_failures_total", Help: "GPU telemetry reads in slice VMs (nvidia-smi over SSH) that failed or timed out."})
	m.reg.MustRegister(m.running, m.tasks, m.gpuQueryFailures, m.guestQueryFailures, newGPUCollector(gpus))
	return m
}

// taskStarted counts a task running; the returned func records its end.
func (m *agentMetrics) taskStarted(typ string) func(status string) {
	start := time.Now()
	m.running.Inc()
	return func(status string) {
		m.running.Dec()
		if status != "" {
			m.tasks.WithLabelValues(typ, status).Observe(time.Since(start).Seconds())
		}
	}
}

// listenMetrics binds Config.MetricsAddr (New calls it, so MetricsURL is
// known before Run).
func (a *Agent) listenMetrics() error {
	a.metrics = newAgentMetrics(&a.gpus)
	for _, c := range a.cfg.Collectors {
		if err := a.metrics.reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	if a.cfg.MetricsAddr == "" {
		return nil
	}
	srv, err := obs.Listen(obs.Config{Addr: a.cfg.MetricsAddr, Gatherer: a.metrics.reg, Log: a.cfg.Log})
	if err != nil {
		return err
	}
	srv.AddCheck(obs.Check{Name: "nats", Func: func(context.Context) error {
		select {
		case <-a.ready:
		default:
			return errors.New("not connected as the node yet (enrolling or connecting)")
		}
		return obs.NATSCheck("hostd", a.nc).Func(context.Background())
	}})
	a.obs = srv
	return nil
}

// MetricsURL is the base URL of /healthz, /readyz and /metrics, or "" when
// Config.MetricsAddr is empty.
func (a *Agent) MetricsURL() string {
	if a.obs == nil {
		return ""
	}
	return a.obs.URL()
}

// serveMetrics serves until ctx ends; the returned func waits for that.
func (a *Agent) serveMetrics(ctx context.Context) (wait func()) {
	if a.obs == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.obs.Serve(ctx); err != nil {
			a.cfg.Log.Error("metrics server", "err", err)
		}
	}()
	return func() { <-done }
}
