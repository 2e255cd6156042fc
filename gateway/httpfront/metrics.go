package httpfront

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/internal/obs"
)

// Metrics count requests and bytes per exposure (its host label); a
// prometheus.Collector.
type Metrics struct {
	// mu protects byLabel.
	mu      sync.Mutex
	byLabel map[string]*Counters
}

// Counters are one exposure's.
type Counters struct {
	requests, limited, bytesIn, bytesOut atomic.Int64
}

// Requests is how many requests were proxied.
func (c *Counters) Requests() int64 { return c.requests.Load() }

// Limited is how many requests the rate limit refused.
func (c *Counters) Limited() int64 { return c.limited.Load() }

// BytesIn and BytesOut are request and response body bytes, and the
// bytes of upgraded connections (WebSockets) from and to the client.
func (c *Counters) BytesIn() int64  { return c.bytesIn.Load() }
func (c *Counters) BytesOut() int64 { return c.bytesOut.Load() }

func newMetrics() *Metrics { return &Metrics{byLabel: map[string]*Counters{}} }

// Of returns an exposure's counters.
func (m *Metrics) Of(label string) *Counters { return m.of(label) }

func (m *Metrics) of(label string) *Counters {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.byLabel[label]
	if c == nil {
		c = &Counters{}
		m.byLabel[label] = c
	}
	return c
}

var (
	descRequests = prometheus.NewDesc(obs.Namespace+"_https_requests_total", "Requests proxied to an exposure.", []string{"exposure"}, nil)
	descLimited  = prometheus.NewDesc(obs.Namespace+"_https_requests_limited_total", "Requests to an exposure refused by the rate limit.", []string{"exposure"}, nil)
	descBytes    = prometheus.NewDesc(obs.Namespace+"_https_bytes_total", "Body bytes through an exposure, with upgraded connections' (WebSockets), by direction (in: from clients, out: to clients).", []string{"exposure", "direction"}, nil)
)

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRequests
	ch <- descLimited
	ch <- descBytes
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for label, c := range m.byLabel {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(c.Requests()), label)
		ch <- prometheus.MustNewConstMetric(descLimited, prometheus.CounterValue, float64(c.Limited()), label)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(c.BytesIn()), label, "in")
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(c.BytesOut()), label, "out")
	}
}

// countingWriter counts response bytes; it keeps the writer's Flusher
// (streams) and, through Unwrap, the rest of http.ResponseController's
// reach. An upgraded connection it hands over (Hijack) counts both ways.
type countingWriter struct {
	http.ResponseWriter
	n, in *atomic.Int64
}

// Hijack takes over the connection of a request whose response upgrades
// it (a WebSocket): the proxy copies both ways on it from then on, past
// Write and the request body, so the connection itself counts.
func (w *countingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &countingConn{Conn: conn, in: w.in, out: w.n}, brw, nil
}

// countingConn counts an upgraded connection's bytes: read from the
// client (in) and written to it (out).
type countingConn struct {
	net.Conn
	in, out *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n.Add(int64(n))
	return n, err
}

// Unwrap gives http.ResponseController the writer beneath.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes the writer beneath (server-sent events).
func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// countingBody counts request body bytes.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
