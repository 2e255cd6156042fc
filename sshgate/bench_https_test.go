package sshgate

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// httpsBench is the production path of an exposure: controld, a sim
// bare-metal host enrolled by hostd's agent with hostd's terminal server,
// and a gateway reaching it over the link (TransportLink) with its HTTPS
// front. The renter's server sends size zero bytes on /big and a few
// bytes on /small, on plain HTTP (what the allocation's port serves,
// "direct") and on HTTPS with the same handler ("direct-tls": what a
// renter serving TLS themselves would give).
type httpsBench struct {
	front, frontH2, direct, directTLS *http.Client
	url, directURL, directTLSURL, via string
}

func newHTTPSBench(b *testing.B, size int) *httpsBench {
	b.Helper()
	ca, err := httpfront.LoadOrCreateDevCA(b.TempDir(), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	// Each part runs under its pprof label (inherited by the goroutines it
	// starts), so a CPU profile splits by process as production runs them:
	// -test.cpuprofile, then go tool pprof -tags.
	var s *realStack
	var gw *Gateway
	part := func(name string, f func()) {
		pprof.Do(context.Background(), pprof.Labels("part", name), func(context.Context) { f() })
	}
	part("controld+hostd", func() { s = startRealStack(b, slog.New(slog.DiscardHandler)) })
	part("gateway", func() { gw = startHTTPSGateway(s, ca) })
	// Bare metal: the node's loopback is this machine's, so the renter's
	// server listens here and hostd's terminal server dials it.
	alloc := s.createAlloc(s.admin, "h100-baremetal", 8)
	zeros := make([]byte, size)
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(zeros) })
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/sink", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	})
	var plain, withTLS *httptest.Server
	part("renter", func() {
		plain = httptest.NewServer(mux)
		withTLS = httptest.NewUnstartedServer(mux)
		withTLS.EnableHTTP2 = false // HTTP/1.1, as the front's clients below
		withTLS.StartTLS()
	})
	b.Cleanup(plain.Close)
	b.Cleanup(withTLS.Close)
	port := plain.Listener.Addr().(*net.TCPAddr).Port
	ex, err := s.admin.ExposeCreate(b.Context(), api.ExposeCreateRequest{Allocation: alloc.ID, Port: port, Share: api.SharePublic, TTL: "1h"})
	if err != nil {
		b.Fatal(err)
	}
	tlsClient := withTLS.Client()
	tlsClient.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
	addr := gw.HTTPSAddr().String()
	return &httpsBench{front: frontClient(b, ca, addr, false), frontH2: frontClient(b, ca, addr, true), direct: &http.Client{}, directTLS: tlsClient,
		url: "https://" + ex.Host + ".localhost", directURL: plain.URL, directTLSURL: withTLS.URL, via: gw.cfg.NodeTransport}
}

// startHTTPSGateway starts a gateway with its HTTPS front (the dev CA's
// certificate for *.localhost) reaching s's nodes over the link, as
// `gpuaas dev` does. Rate limits are the front's protection, not what is
// measured.
func startHTTPSGateway(s *realStack, ca *httpfront.DevCA) *Gateway {
	return startHTTPSGatewayOn(s, ca, "127.0.0.1:0")
}

// startHTTPSGatewayOn is startHTTPSGateway with the HTTPS front listening
// on listen.
func startHTTPSGatewayOn(s *realStack, ca *httpfront.DevCA, listen string) *Gateway {
	b := s.t
	gwClient, gwKey := s.env.Gateway(b, "gw-https")
	gw, err := New(Config{Listen: "127.0.0.1:0", HostKey: sshtest.NewKey(b), Client: gwClient, GatewayKey: gwKey,
		RecordingDir: b.TempDir(), Name: "gw-https", NodeTransport: TransportLink, Log: s.log,
		HTTPS: HTTPS{Listen: listen, Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now),
			RatePerExposure: 1e6, RatePerSource: 1e6, Burst: 1e6}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	select {
	case <-gw.Ready():
	case err := <-done:
		b.Fatalf("gateway: %v", err)
	case <-time.After(30 * time.Second):
		b.Fatal("gateway not ready")
	}
	return gw
}

func fetch(b *testing.B, c *http.Client, url string) int64 {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return n
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// leg is one way of moving the body, with what each transfer took.
type leg struct {
	name     string
	move     func() int64 // one transfer; the bytes moved
	mbs, cpu []float64    // MB/s, CPU-s per GiB
}

func getLeg(b *testing.B, name string, c *http.Client, url string) *leg {
	return &leg{name: name, move: func() int64 { return fetch(b, c, url) }}
}

// runLegs runs one transfer per leg per op, the order rotating, and
// reports each leg's median MB/s and CPU-s/GiB; BENCH_HTTPS_LEG=NAME runs
// that leg alone (to profile it). It returns the legs run.
func runLegs(b *testing.B, legs []*leg) []*leg {
	if only := os.Getenv("BENCH_HTTPS_LEG"); only != "" {
		legs = slices.DeleteFunc(legs, func(l *leg) bool { return l.name != only })
	}
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("part", "client")))
	defer pprof.SetGoroutineLabels(context.Background())
	for _, l := range legs {
		l.move() // connections made, the verdict cached
	}
	op := 0
	for b.Loop() {
		for i := range legs {
			l := legs[(op+i)%len(legs)]
			cpu0, t0 := cpuTime(b), time.Now()
			n := l.move()
			wall, cpu := time.Since(t0), cpuTime(b)-cpu0
			l.mbs = append(l.mbs, float64(n)/1e6/wall.Seconds())
			l.cpu = append(l.cpu, cpu.Seconds()*float64(1<<30)/float64(n))
		}
		op++
	}
	for _, l := range legs {
		b.ReportMetric(median(l.mbs), l.name+"-MB/s")
		b.ReportMetric(median(l.cpu), l.name+"-cpu-s/GiB")
	}
	return legs
}

// reportRatio reports the median of the per-op ratios of legs a and b's
// MB/s as unit, when both ran.
func reportRatio(tb *testing.B, legs []*leg, a, b, unit string) {
	i, j := slices.IndexFunc(legs, func(l *leg) bool { return l.name == a }), slices.IndexFunc(legs, func(l *leg) bool { return l.name == b })
	if i < 0 || j < 0 {
		return
	}
	rs := make([]float64, len(legs[i].mbs))
	for k := range rs {
		rs[k] = legs[i].mbs[k] / legs[j].mbs[k]
	}
	tb.ReportMetric(median(rs), unit)
}

// BenchmarkHTTPSThroughput moves 64 MiB responses over four legs in one
// run: through the HTTPS front over the production path (TLS, a verdict,
// a direct-tcpip channel over the link to hostd's terminal server, which
// dials the port) with HTTP/1.1 ("front", the goal's value) and with
// HTTP/2 as browsers use it ("front-h2"); straight to the allocation's
// port in plain HTTP ("direct", the goal's baseline); and straight to the
// same handler over HTTPS ("direct-tls": what a renter serving TLS
// themselves gives, a fairer baseline reported alongside, see
// bench/README.md). Each op is one transfer per leg, the legs' order
// rotating per op so that a burst of load on the shared machine hits each
// leg alike. Reported: each leg's median MB/s and median CPU seconds per
// GiB of the whole process (client, front, link, terminal server and
// renter's server all run here; CPU per byte does not move with the
// machine's load as MB/s does), and front/direct and front/direct-tls as
// the medians of the per-op ratios (goals: bench/goals.json).
// BENCH_HTTPS_LEG=front runs one leg alone (to profile it).
func BenchmarkHTTPSThroughput(b *testing.B) {
	const size = 64 << 20
	h := newHTTPSBench(b, size)
	b.Logf("node transport: %s", h.via)
	legs := runLegs(b, []*leg{getLeg(b, "front", h.front, h.url+"/big"), getLeg(b, "direct", h.direct, h.directURL+"/big"),
		getLeg(b, "direct-tls", h.directTLS, h.directTLSURL+"/big"), getLeg(b, "front-h2", h.frontH2, h.url+"/big")})
	reportRatio(b, legs, "front", "direct", "front/direct")
	reportRatio(b, legs, "front", "direct-tls", "front/direct-tls")
}

// BenchmarkHTTPSUpload moves 64 MiB request bodies (POST, with a
// Content-Length) the other way over the same legs as
// BenchmarkHTTPSThroughput, to a handler that reads and discards them.
func BenchmarkHTTPSUpload(b *testing.B) {
	const size = 64 << 20
	h := newHTTPSBench(b, 0)
	body := make([]byte, size)
	post := func(name string, c *http.Client, url string) *leg {
		return &leg{name: name, move: func() int64 {
			resp, err := c.Post(url, "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(got) != strconv.Itoa(size) {
				b.Fatalf("POST %s: %s, %q; want %d bytes read", url, resp.Status, got, size)
			}
			return size
		}}
	}
	legs := runLegs(b, []*leg{post("front", h.front, h.url+"/sink"), post("direct", h.direct, h.directURL+"/sink"),
		post("direct-tls", h.directTLS, h.directTLSURL+"/sink"), post("front-h2", h.frontH2, h.url+"/sink")})
	reportRatio(b, legs, "front", "direct", "front/direct")
	reportRatio(b, legs, "front", "direct-tls", "front/direct-tls")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// BenchmarkHTTPSLatency times small requests on kept-alive connections
// through the front and straight to the port, and reports each one's p50
// and the front's added p50 in ms.
func BenchmarkHTTPSLatency(b *testing.B) {
	h := newHTTPSBench(b, 0)
	p50 := func(c *http.Client, url string, n int) time.Duration {
		fetch(b, c, url) // the connection (and the verdict) made once
		ds := make([]time.Duration, n)
		for i := range ds {
			start := time.Now()
			fetch(b, c, url)
			ds[i] = time.Since(start)
		}
		slices.Sort(ds)
		return ds[n/2]
	}
	for b.Loop() {
		front, direct := p50(h.front, h.url+"/small", 200), p50(h.direct, h.directURL+"/small", 200)
		b.ReportMetric(float64(front.Microseconds())/1000, "front-p50-ms")
		b.ReportMetric(float64(direct.Microseconds())/1000, "direct-p50-ms")
		b.ReportMetric(float64((front-direct).Microseconds())/1000, "added-p50-ms")
	}
}
