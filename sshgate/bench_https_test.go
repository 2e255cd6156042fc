package sshgate

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
)

// httpsBench is a front in front of a renter's server that sends size
// zero bytes on /big and a few bytes on /small.
type httpsBench struct {
	front, direct  *http.Client
	url, directURL string
}

func newHTTPSBench(b *testing.B, size int) *httpsBench {
	b.Helper()
	ca, err := httpfront.LoadOrCreateDevCA(b.TempDir(), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	e := newEnv(b, envOptions{config: func(c *Config) {
		// The rate limits are the front's protection, not what is measured.
		c.HTTPS = HTTPS{Listen: "127.0.0.1:0", Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now),
			RatePerExposure: 1e6, RatePerSource: 1e6, Burst: 1e6}
	}})
	u := e.newUser()
	alloc := e.addAlloc(u)
	zeros := make([]byte, size)
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(zeros) })
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	ex, err := u.client.ExposeCreate(b.Context(), api.ExposeCreateRequest{Allocation: alloc, Port: port, Share: api.SharePublic, TTL: "1h"})
	if err != nil {
		b.Fatal(err)
	}
	return &httpsBench{front: frontClient(b, ca, e.gw.HTTPSAddr().String(), false), direct: &http.Client{},
		url: "https://" + ex.Host + ".localhost", directURL: fmt.Sprintf("http://127.0.0.1:%d", port)}
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

// BenchmarkHTTPSThroughput moves 64 MiB responses through the HTTPS front
// (TLS, a verdict, the core's stream over the node link) and straight from
// the allocation's port, in one run: MB/s of each (goals: bench/goals.json).
func BenchmarkHTTPSThroughput(b *testing.B) {
	const size = 64 << 20
	h := newHTTPSBench(b, size)
	b.Run("front", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			fetch(b, h.front, h.url+"/big")
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			fetch(b, h.direct, h.directURL+"/big")
		}
	})
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
