package busauth_test

// Benchmarks of the auth callout, each beside a baseline from the same
// run (bench/README.md, "Zero-trust bus"):
//   - BenchmarkConnectCallout vs BenchmarkConnectNoAuth: a new connection
//     and its first request (auth.whoami) with the callout deciding it,
//     and on a server without auth (controld without the callout);
//   - BenchmarkConnectRate: new connections per second, 8 connectors at
//     once, through the callout.

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func benchConnect(b *testing.B, plain bool) {
	env := controldtest.Start(b, controldtest.Options{NoNodes: true, PlainBus: plain})
	opts, _ := api.SessionConnOptions(env.AdminToken)
	ctx := context.Background()
	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		nc, err := nats.Connect(env.NATSURL, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := api.NewClient(nc, api.WithToken(env.AdminToken)).Whoami(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		nc.Close()
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(p(0.5), "p50-us")
	b.ReportMetric(p(0.99), "p99-us")
}

// BenchmarkConnectCallout: connect with a session token, have the callout
// decide, then one request.
func BenchmarkConnectCallout(b *testing.B) { benchConnect(b, false) }

// BenchmarkConnectNoAuth is BenchmarkConnectCallout's baseline: the same
// on a server without auth.
func BenchmarkConnectNoAuth(b *testing.B) { benchConnect(b, true) }

// BenchmarkConnectRate: 8 connectors open (and close) connections through
// the callout as fast as they can.
func BenchmarkConnectRate(b *testing.B) {
	env := controldtest.Start(b, controldtest.Options{NoNodes: true})
	opts, _ := api.SessionConnOptions(env.AdminToken)
	const connectors = 8
	var n atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range connectors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n.Add(1) <= int64(b.N) {
				nc, err := nats.Connect(env.NATSURL, opts...)
				if err != nil {
					b.Error(err)
					return
				}
				nc.Close()
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "conns/s")
}
