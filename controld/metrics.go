package controld

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/hosts"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/webhooks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/obs"
)

// metrics are controld's Prometheus metrics. The gauges read from Postgres
// are the same on every replica; alerts take their max.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.HistogramVec // endpoint
	errors   *prometheus.CounterVec   // endpoint, code
	tasks    *prometheus.HistogramVec // type, status
	// repliesRefused counts requests dropped for their reply subject
	// (replyguard.go), by reason.
	repliesRefused *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: obs.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: obs.Namespace, Subsystem: "api",
			Name: "request_duration_seconds", Help: "Time controld took to answer an API request, by endpoint.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"endpoint"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "api",
			Name: "request_errors_total", Help: "API requests answered with an error, by endpoint and error code."},
			[]string{"endpoint", "code"}),
		repliesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "api",
			Name: "replies_refused_total", Help: "Requests dropped unanswered and unexecuted because their reply subject was not the inbox of the identity they proved, by reason."},
			[]string{"reason"}),
		tasks: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: obs.Namespace, Subsystem: "tasks",
			Name: "duration_seconds", Help: "Time from a node task's creation to its applied result, by type and status.",
			Buckets: []float64{.1, .5, 1, 5, 10, 30, 60, 120, 300, 600, 1800}}, []string{"type", "status"}),
	}
	m.reg.MustRegister(m.requests, m.errors, m.tasks, m.repliesRefused, &dbCollector{s: s}, &streamCollector{s: s},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "billing",
			Name: "window_seconds", Help: "The billing accrual window."},
			func() float64 { return s.cfg.Billing.Window.Seconds() }))
	for _, ep := range s.endpoints() {
		m.requests.WithLabelValues(ep.spec.Name) // every endpoint's series exists from the start
	}
	for _, r := range []string{replyNotInbox, replyBadProof, replyNotCaller, hosts.RefusedNotNode} {
		m.repliesRefused.WithLabelValues(r)
	}
	return m
}

// observeTask records a task whose result was applied.
func (m *metrics) observeTask(typ, status string, took time.Duration) {
	m.tasks.WithLabelValues(typ, status).Observe(took.Seconds())
}

// observeRequest records one answered request.
func (m *metrics) observeRequest(endpoint string, start time.Time, err error) {
	m.requests.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.WithLabelValues(endpoint, string(errorCode(err))).Inc()
	}
}

// errorCode is the catalog code replyError answers err with.
func errorCode(err error) api.Code {
	var e *api.Error
	switch {
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, context.DeadlineExceeded):
		return api.CodeUnavailable
	}
	return api.CodeInternal
}

// dbCollectTimeout bounds the queries of one scrape.
const dbCollectTimeout = 3 * time.Second

var (
	outboxDesc = prometheus.NewDesc(obs.Namespace+"_outbox_events", "Outbox events not published yet: pending (the relay will retry) and dead (it gave up: `gpuaas ops outbox`).",
		[]string{"state"}, nil)
	tasksDesc = prometheus.NewDesc(obs.Namespace+"_tasks_open", "Node tasks not finished, by state; pending ones are the dispatcher's queue.",
		[]string{"state"}, nil)
	nodesDesc = prometheus.NewDesc(obs.Namespace+"_nodes", "Nodes by state.", []string{"state"}, nil)
	lagDesc   = prometheus.NewDesc(obs.Namespace+"_billing_accrual_lag_seconds",
		"Longest time since a running meter (an allocation's or a volume's) was last charged; above the window plus a tick, accrual is behind.", nil, nil)
	relayDesc = prometheus.NewDesc(obs.Namespace+"_outbox_relay_held", "1 while some replica holds the outbox relay's lease.", nil, nil)
	hookDesc  = prometheus.NewDesc(obs.Namespace+"_webhook_deliveries",
		"Webhook deliveries not delivered: pending (being tried) and dead (attempts ran out: `gpuaas webhook deliveries --state dead`).",
		[]string{"state"}, nil)
)

// dbCollector reads its gauges from Postgres at scrape time.
type dbCollector struct{ s *Server }

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{outboxDesc, tasksDesc, nodesDesc, lagDesc, relayDesc, hookDesc} {
		ch <- d
	}
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), dbCollectTimeout)
	defer cancel()
	pool := c.s.pool
	if pending, dead, err := outbox.Counts(ctx, pool); err != nil {
		ch <- prometheus.NewInvalidMetric(outboxDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(pending), "pending")
		ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(dead), "dead")
	}
	collectStates(ch, tasksDesc, tasks.OpenStates, func() (map[string]int, error) { return tasks.CountOpen(ctx, pool) })
	collectStates(ch, nodesDesc, node.States, func() (map[string]int, error) { return node.CountByState(ctx, pool) })
	if lag, err := billing.AccrualLag(ctx, pool, c.s.now()); err != nil {
		ch <- prometheus.NewInvalidMetric(lagDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, lag.Seconds())
	}
	collectStates(ch, hookDesc, []string{api.DeliveryPending, api.DeliveryDead},
		func() (map[string]int, error) { return webhooks.Counts(ctx, pool) })
	if epoch, err := outbox.RelayHolder(ctx, pool); err != nil {
		ch <- prometheus.NewInvalidMetric(relayDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(relayDesc, prometheus.GaugeValue, float64(min(epoch, 1)))
	}
}

// collectStates exports one series per state, zeros included, so an
// alert on a state sees 0 rather than nothing.
func collectStates(ch chan<- prometheus.Metric, d *prometheus.Desc, states []string, count func() (map[string]int, error)) {
	n, err := count()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(d, err)
		return
	}
	for _, st := range states {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(n[st]), st)
	}
}

// readyChecks are what /readyz asks: Postgres answers, the NATS server
// answers (a PING, not only the connection's state: a silent partition
// leaves a connection "connected" until its pings time out), this replica
// serves (serving.go), the schema is migrated, and the singleton loops'
// holder is known (some replica holds the outbox relay's lease). Billing
// works per tick: its health is the accrual lag.
func (s *Server) readyChecks() []obs.Check {
	return []obs.Check{
		{Name: "postgres", Func: func(ctx context.Context) error { return s.pool.Ping(ctx) }},
		{Name: "nats", Func: func(ctx context.Context) error {
			for _, c := range s.natsConns() {
				if err := natsAnswers(ctx, c.nc); err != nil {
					return fmt.Errorf("%s connection: %w", c.name, err)
				}
			}
			return nil
		}},
		{Name: "serving", Func: func(context.Context) error {
			if !s.Serving() {
				return errors.New("this replica stopped serving: Postgres or NATS did not answer")
			}
			return nil
		}},
		{Name: "migrations", Func: func(ctx context.Context) error { return store.CheckMigrated(ctx, s.pool) }},
		{Name: "singletons", Func: func(ctx context.Context) error {
			epoch, err := outbox.RelayHolder(ctx, s.pool)
			if err != nil {
				return err
			}
			if epoch == 0 {
				return errors.New("no replica holds the outbox relay's lease")
			}
			return nil
		}},
	}
}

// natsProbeTimeout bounds natsAnswers when its context has no deadline.
const natsProbeTimeout = 2 * time.Second

// natsAnswers checks that nc is connected and its server answers a PING.
func natsAnswers(ctx context.Context, nc *nats.Conn) error {
	if !nc.IsConnected() {
		return errors.New("connection is " + nc.Status().String())
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, natsProbeTimeout)
		defer cancel()
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("server does not answer: %w", err)
	}
	return nil
}

// listenMetrics binds Config.MetricsAddr, so that MetricsURL is known once
// Ready is closed.
func (s *Server) listenMetrics() error {
	if s.cfg.MetricsAddr == "" {
		return nil
	}
	if err := obs.RegisterNATS(s.metrics.reg, "controld", s.cfg.NATS); err != nil {
		return err
	}
	srv, err := obs.Listen(obs.Config{Addr: s.cfg.MetricsAddr, Gatherer: s.metrics.reg, Log: s.cfg.Log})
	if err != nil {
		return err
	}
	srv.AddCheck(s.readyChecks()...)
	s.obs = srv
	return nil
}

// MetricsURL is the base URL of /healthz, /readyz and /metrics, or "" when
// Config.MetricsAddr is empty.
func (s *Server) MetricsURL() string {
	if s.obs == nil {
		return ""
	}
	return s.obs.URL()
}

func (s *Server) serveMetrics(ctx context.Context) error {
	if s.obs == nil {
		return nil
	}
	return s.obs.Serve(ctx)
}
