package sshgate

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
)

// idleWebSockets is how many connections BenchmarkIdleWebSockets holds.
var idleWebSockets = flag.Int("idle-websockets", 1000, "concurrent idle WebSockets BenchmarkIdleWebSockets opens")

// wsHeapProfile is where BenchmarkIdleWebSockets writes a heap profile
// taken with every socket open.
var wsHeapProfile = flag.String("ws-heapprofile", "", "write a heap profile with every idle WebSocket open to this file")

// fdsPerWebSocket is about how many files one idle WebSocket keeps open
// in one process (the child processes inherit the limit): in the node's,
// its connection to the renter's port; in the clients', the client's
// connection and the renter's.
const fdsPerWebSocket = 4

// BenchmarkIdleWebSockets holds -idle-websockets (1,000) concurrent idle
// WebSockets open through the HTTPS front to a renter's echo server, as a
// Jupyter page holds its kernels' sockets, and reports this process's
// growth per connection: RSS, Go heap and stack in use, goroutines. Every
// socket echoes one message first (upgraded through the front, not merely
// connected). After every client drops (no close frame), the goroutines
// must come back to where they were (give or take a few of the process's
// own) within a minute: the sockets' streams end at once, their pooled
// links to the node 15 s later (core.DefaultLinkIdle), which s-to-baseline
// includes.
//
// This process runs controld and the gateway (front, core, node links):
// its figures (rss-KiB/conn, heap-KiB/conn, stack-KiB/conn,
// goroutines/conn) are the gateway's. The node's side of the link (the
// test node's SSH server and direct-tcpip relays, which run on the node in
// production) runs in a child process of its own (wsNodeMain), measured
// there: node-rss-KiB/conn, node-heap-KiB/conn, node-stack-KiB/conn,
// node-goroutines/conn. The clients and the renter's server run in
// another child (wsClientsMain), not counted. Goal: bench/goals.json (the
// gateway's RSS).
//
//	go test -run '^$' -bench IdleWebSockets -benchtime=1x ./sshgate/
func BenchmarkIdleWebSockets(b *testing.B) {
	n := *idleWebSockets
	need := uint64(n)*fdsPerWebSocket + 1024
	if limit, err := raiseFileLimit(need); err != nil {
		b.Fatalf("open-file limit: %v", err)
	} else if limit < need {
		b.Skipf("%d WebSockets need about %d open files; RLIMIT_NOFILE allows %d: run with fewer -idle-websockets", n, need, limit)
	}
	ca, err := httpfront.LoadOrCreateDevCA(b.TempDir(), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	e := newEnv(b, envOptions{config: func(c *Config) {
		c.Log = slog.New(slog.DiscardHandler)
		// Opening a thousand sockets at once is the benchmark, not abuse.
		c.HTTPS = HTTPS{Listen: "127.0.0.1:0", Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now),
			RatePerExposure: 1e6, RatePerSource: 1e6, Burst: 1e6}
	}})
	node := startWSNode(b, e)
	u := e.newUser()
	alloc := e.addAlloc(u)

	// The clients' process also runs the renter's echo server, for the
	// whole run: the exposure's host name carries its port.
	c := startWSClients(b, ca.CertPEM, e.gw.HTTPSAddr().String())
	ex, err := u.client.ExposeCreate(b.Context(), api.ExposeCreateRequest{Allocation: alloc, Port: c.port, Share: api.SharePublic, TTL: "1h"})
	if err != nil {
		b.Fatal(err)
	}
	host := ex.Host + ".localhost"
	// Warm up with one socket: pools and the verdict cache are not the
	// sockets'.
	c.do(b, fmt.Sprintf("open %s 1", host), "ready")
	c.do(b, "close", "closed")
	baseline := settledGoroutines(b)

	for b.Loop() {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		rssBefore := rssOf(b, "self")
		g0 := runtime.NumGoroutine()
		node0 := node.stats(b)
		local0 := nodeGoroutines()

		start := time.Now()
		c.do(b, fmt.Sprintf("open %s %d", host, n), "ready")
		opened := time.Since(start)

		var during runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&during)
		rssDuring := rssOf(b, "self")
		gPeak := runtime.NumGoroutine()
		byComponent := goroutinesByComponent()
		nodePeak := node.stats(b)
		if local := nodeGoroutines() - local0; local > 0 {
			b.Fatalf("%d goroutines of a node's side in the gateway's process; want its streams in the node process", local)
		}
		if nodePeak.goroutines < node0.goroutines+uint64(n) {
			b.Fatalf("node process: %d goroutines with %d WebSockets, %d before; want a relay per socket there", nodePeak.goroutines, n, node0.goroutines)
		}
		if *wsHeapProfile != "" {
			writeProfile(b, "heap", *wsHeapProfile, 0)
		}

		c.do(b, "close", "closed")
		dropped := time.Now()
		var gAfter int
		deadline := time.Now().Add(time.Minute)
		// A few of the process's own (controld's loops, the bus) come and
		// go on their own; a leak per socket is hundreds.
		const slack = 16
		for gAfter = runtime.NumGoroutine(); gAfter > g0+slack; gAfter = runtime.NumGoroutine() {
			if time.Now().After(deadline) {
				b.Fatalf("goroutines: %d before, %d with %d WebSockets, still %d a minute after the clients dropped; want <= %d. Left:\n%s",
					g0, gPeak, n, gAfter, g0+slack, goroutineSummary())
			}
			time.Sleep(20 * time.Millisecond) // waiting for the streams to wind down
		}
		back := time.Since(dropped)

		per := func(after, before uint64) float64 { return (float64(after) - float64(before)) / float64(n) / 1024 }
		b.ReportMetric(per(rssDuring, rssBefore), "rss-KiB/conn")
		b.ReportMetric(per(during.HeapInuse, before.HeapInuse), "heap-KiB/conn")
		b.ReportMetric(per(during.StackInuse, before.StackInuse), "stack-KiB/conn")
		b.ReportMetric(float64(gPeak-g0)/float64(n), "goroutines/conn")
		b.ReportMetric(per(nodePeak.rss, node0.rss), "node-rss-KiB/conn")
		b.ReportMetric(per(nodePeak.heap, node0.heap), "node-heap-KiB/conn")
		b.ReportMetric(per(nodePeak.stack, node0.stack), "node-stack-KiB/conn")
		b.ReportMetric((float64(nodePeak.goroutines)-float64(node0.goroutines))/float64(n), "node-goroutines/conn")
		b.ReportMetric(back.Seconds(), "s-to-baseline")
		b.ReportMetric(float64(g0), "goroutines-before")
		b.ReportMetric(float64(gAfter), "goroutines-after")
		b.Logf("%d WebSockets opened and echoed in %s; goroutines: baseline %d (settled), before %d, peak %d, after %d within %s; by component with sockets open: %v",
			n, opened.Round(time.Millisecond), baseline, g0, gPeak, gAfter, back.Round(time.Millisecond), byComponent)
	}
	c.quit(b)
	node.quit(b)
}

// nodeGoroutines counts the goroutines of a test node's side (its SSH
// server and direct-tcpip relays) in this process: env's own test node,
// which the benchmark does not use, so none of them may come with the
// sockets.
func nodeGoroutines() int {
	n := 0
	for _, g := range goroutineStacks() {
		// The front copies with httputil, so every Splice here is the
		// node's relay.
		if strings.Contains(g, "gliderlabs/ssh.") || strings.Contains(g, "sshgate.directTCPIP") ||
			strings.Contains(g, "sshwire.Splice") || strings.Contains(g, "sshwire.AcceptAndSplice") {
			n++
		}
	}
	return n
}

// wsClients is the running clients' process.
type wsClients struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	port int // the renter's echo server
}

// wsClientsEnv, set, runs this test binary as BenchmarkIdleWebSockets's
// clients' process (see TestMain); its value is the front's address.
const wsClientsEnv = "GPUAAS_BENCH_WS_CLIENTS"

// startWSClients starts the clients' process, trusting caPEM for the
// front at addr, and returns once its echo server listens.
func startWSClients(b *testing.B, caPEM []byte, addr string) *wsClients {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), wsClientsEnv+"="+addr)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := &wsClients{cmd: cmd, in: in, out: bufio.NewReader(out)}
	// The CA goes first, one line of base64-free PEM joined by '|'.
	if _, err := io.WriteString(in, strings.ReplaceAll(string(caPEM), "\n", "|")+"\n"); err != nil {
		b.Fatal(err)
	}
	line := c.read(b)
	p, ok := strings.CutPrefix(line, "listening ")
	if c.port, err = strconv.Atoi(p); !ok || err != nil {
		b.Fatalf("clients said %q; want listening PORT", line)
	}
	return c
}

// do sends cmd to the clients' process and expects want back.
func (c *wsClients) do(b *testing.B, cmd, want string) {
	b.Helper()
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		b.Fatal(err)
	}
	if got := c.read(b); got != want {
		b.Fatalf("clients said %q to %q; want %q", got, cmd, want)
	}
}

func (c *wsClients) read(b *testing.B) string {
	b.Helper()
	line, err := c.out.ReadString('\n')
	if err != nil {
		b.Fatalf("clients' process: %v (its stderr is above)", err)
	}
	return strings.TrimSpace(line)
}

// quit closes the clients' stdin and waits for a clean exit.
func (c *wsClients) quit(b *testing.B) {
	b.Helper()
	_ = c.in.Close()
	if err := c.cmd.Wait(); err != nil {
		b.Fatalf("clients' process: %v", err)
	}
}
