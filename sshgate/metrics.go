package sshgate

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/internal/obs"
)

// gateMetrics are the gateway's Prometheus metrics.
type gateMetrics struct {
	reg *prometheus.Registry
	// active counts indexed sessions (shells, commands, SFTP, forwards)
	// from their index entry to their end.
	active   prometheus.Gauge
	sessions *prometheus.CounterVec // kind
	bytes    prometheus.Counter
	// connsRefused counts connections closed as accepted for their
	// address's limit (ConnLimit), by which limit.
	connsRefused *prometheus.CounterVec
}

func newGateMetrics() *gateMetrics {
	m := &gateMetrics{reg: obs.NewRegistry(),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "ssh",
			Name: "sessions_active", Help: "SSH sessions and forwards open through the gateway."}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "ssh",
			Name: "sessions_total", Help: "SSH sessions and forwards opened through the gateway, by kind."}, []string{"kind"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "ssh",
			Name: "bytes_total", Help: "Bytes relayed by ended sessions and forwards, both directions."}),
		connsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "ssh",
			Name: "connections_refused_total", Help: "Connections closed as accepted because their address was over its limit: rate (new connections a second) or open (at once)."},
			[]string{"limit"}),
	}
	m.connsRefused.WithLabelValues("rate")
	m.connsRefused.WithLabelValues("open")
	m.reg.MustRegister(m.active, m.sessions, m.bytes, m.connsRefused)
	return m
}

func (m *gateMetrics) started(kind string) {
	m.active.Inc()
	m.sessions.WithLabelValues(kind).Inc()
}

func (m *gateMetrics) ended(bytes int64) {
	m.active.Dec()
	m.bytes.Add(float64(max(bytes, 0)))
}

// listenMetrics binds Config.MetricsAddr (New calls it, so MetricsURL is
// known before Run).
func (g *Gateway) listenMetrics() error {
	g.metrics = newGateMetrics()
	if g.cfg.MetricsAddr == "" {
		return nil
	}
	if err := obs.RegisterNATS(g.metrics.reg, "sshgate", g.cfg.Client.Conn()); err != nil {
		return err
	}
	srv, err := obs.Listen(obs.Config{Addr: g.cfg.MetricsAddr, Gatherer: g.metrics.reg, Log: g.log})
	if err != nil {
		return err
	}
	srv.AddCheck(obs.NATSCheck("sshgate", g.cfg.Client.Conn()), obs.Check{Name: "ssh", Func: func(context.Context) error {
		select {
		case <-g.ready:
			return nil
		default:
			return errors.New("not serving SSH yet (fetching trust and host certificate from controld)")
		}
	}})
	g.obs = srv
	return nil
}

// MetricsURL is the base URL of /healthz, /readyz and /metrics, or "" when
// Config.MetricsAddr is empty.
func (g *Gateway) MetricsURL() string {
	if g.obs == nil {
		return ""
	}
	return g.obs.URL()
}

// serveMetrics serves until ctx ends or the returned func is called,
// which stops the server and waits for it. Run calls it on every return:
// a Run that fails (at start-up, say) must return its error at once, not
// once its context ends.
func (g *Gateway) serveMetrics(ctx context.Context) (stop func()) {
	if g.obs == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := g.obs.Serve(ctx); err != nil {
			g.log.Error("metrics server", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}
