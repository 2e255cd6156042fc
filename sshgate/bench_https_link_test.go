package sshgate

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
)

// benchLink is a client's network link of a given rate: a network
// namespace joined to this one by a veth pair whose two ends shape what
// they send with a token bucket (tc tbf). The client dials from inside the
// namespace; the servers listen on HostIP.
type benchLink struct {
	ns             *os.File // the namespace, for setns
	HostIP, PeerIP string
}

func newBenchLink(b testing.TB, rate string) *benchLink {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("a shaped link needs root (a network namespace and tc)")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s is missing", tool)
		}
	}
	id := rand.IntN(1 << 16)
	name, host, peer := fmt.Sprintf("gpuaas-bench-%04x", id), fmt.Sprintf("gbh%04x", id), fmt.Sprintf("gbp%04x", id)
	subnet := fmt.Sprintf("10.251.%d.", rand.IntN(250))
	run := func(args ...string) {
		b.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	b.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", host).Run()
		_ = exec.Command("ip", "netns", "del", name).Run()
	})
	run("ip", "netns", "add", name)
	run("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	run("ip", "link", "set", peer, "netns", name)
	run("ip", "addr", "add", subnet+"1/30", "dev", host)
	run("ip", "link", "set", host, "up")
	run("ip", "-n", name, "addr", "add", subnet+"2/30", "dev", peer)
	run("ip", "-n", name, "link", "set", peer, "up")
	run("ip", "-n", name, "link", "set", "lo", "up")
	// Both directions shaped: responses leave through host, uploads
	// through peer. The burst is a few milliseconds' worth at the rate.
	run("tc", "qdisc", "add", "dev", host, "root", "tbf", "rate", rate, "burst", "512kb", "latency", "20ms")
	run("ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", peer, "root", "tbf", "rate", rate, "burst", "512kb", "latency", "20ms")
	ns, err := os.Open("/run/netns/" + name)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ns.Close() })
	return &benchLink{ns: ns, HostIP: subnet + "1", PeerIP: subnet + "2"}
}

// dial opens a TCP connection to addr from inside the link's namespace
// (the socket stays in the namespace whichever thread uses it).
func (l *benchLink) dial(ctx context.Context, network, addr string) (c net.Conn, err error) {
	err = inNetns(l.ns, func() error {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// inNetns runs fn on this goroutine's thread moved into the network
// namespace ns, and moves the thread back before unlocking it. The thread
// must not end in the namespace instead (a goroutine that exits locked
// takes its thread with it): a child started from that thread with
// Pdeathsig gets its signal when the thread, not the process, ends —
// testutil's PostgreSQL cluster (pgserver asks for SIGINT, a fast
// shutdown) then dies mid-benchmark, and the front's verdict fails with
// 57P01 as a 502 (prctl(2), PR_SET_PDEATHSIG; bench/README.md).
func inNetns(ns *os.File, fn func() error) error {
	runtime.LockOSThread()
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("own netns: %w", err)
	}
	defer home.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns: %w", err)
	}
	ferr := fn()
	if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
		// Left locked: the thread ends with its goroutine rather than
		// serve others from inside the namespace.
		return fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// client is an HTTP/1.1 client on the link; with ca, one that trusts it
// and dials addr whatever the URL's host.
func (l *benchLink) client(b *testing.B, ca *httpfront.DevCA, addr string) *http.Client {
	b.Helper()
	tr := &http.Transport{DialContext: l.dial, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca.CertPEM) {
			b.Fatal("dev CA PEM")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) { return l.dial(ctx, network, addr) }
	}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// failureLog is the stack's logger for a benchmark: lines at info and
// above are kept and written to b's log only if it fails (a 502 from
// the front is explained by the gateway's "https proxy" line), so a
// passing run's output stays the figures.
func failureLog(b *testing.B) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	b.Cleanup(func() {
		if b.Failed() {
			mu.Lock()
			defer mu.Unlock()
			b.Logf("stack's log (info and above):\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// BenchmarkHTTPSThroughputLink is BenchmarkHTTPSThroughput's front,
// direct and direct-tls legs over a client link of a given rate (a veth pair shaped with
// tc tbf into a network namespace the client dials from), as a renter's
// browser or script reaches the gateway from outside; the gateway–node
// link stays unshaped, as in a data centre. It shows whether the front
// costs a client anything when the client's link, not this machine's CPU,
// is what limits a transfer (bench/README.md, "HTTPS over a client link").
// Not a goal row: the goal's baseline is BenchmarkHTTPSThroughput's.
func BenchmarkHTTPSThroughputLink(b *testing.B) {
	for _, rate := range []string{"1gbit", "2500mbit"} {
		b.Run("rate="+rate, func(b *testing.B) {
			const size = 64 << 20
			link := newBenchLink(b, rate)
			ca, err := httpfront.LoadOrCreateDevCA(b.TempDir(), time.Now())
			if err != nil {
				b.Fatal(err)
			}
			s := startRealStack(b, failureLog(b))
			gw := startHTTPSGatewayOn(s, ca, link.HostIP+":0")
			alloc := s.createAlloc(s.admin, "h100-baremetal", 8)
			zeros := make([]byte, size)
			mux := http.NewServeMux()
			mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(zeros) })
			// The renter's server: on loopback for the front's path (hostd's
			// terminal server dials the allocation's port there) and on the
			// link's host address for the direct leg — the same handler.
			plain := httptest.NewServer(mux)
			b.Cleanup(plain.Close)
			onLink := httptest.NewUnstartedServer(mux)
			ln, err := net.Listen("tcp", link.HostIP+":0")
			if err != nil {
				b.Fatal(err)
			}
			onLink.Listener = ln
			onLink.Start()
			b.Cleanup(onLink.Close)
			onLinkTLS := httptest.NewUnstartedServer(mux)
			if onLinkTLS.Listener, err = net.Listen("tcp", link.HostIP+":0"); err != nil {
				b.Fatal(err)
			}
			onLinkTLS.EnableHTTP2 = false
			onLinkTLS.StartTLS()
			b.Cleanup(onLinkTLS.Close)
			directTLS := link.client(b, nil, "")
			tc := onLinkTLS.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
			tc.ServerName = "example.com" // httptest's certificate names it and 127.0.0.1, not the link's address
			directTLS.Transport.(*http.Transport).TLSClientConfig = tc
			port := plain.Listener.Addr().(*net.TCPAddr).Port
			ex, err := s.admin.ExposeCreate(b.Context(), api.ExposeCreateRequest{Allocation: alloc.ID, Port: port, Share: api.SharePublic, TTL: "1h"})
			if err != nil {
				b.Fatal(err)
			}
			front := link.client(b, ca, gw.HTTPSAddr().String())
			direct := link.client(b, nil, "")
			legs := runLegs(b, []*leg{getLeg(b, "front", front, "https://"+ex.Host+".localhost/big"),
				getLeg(b, "direct", direct, onLink.URL+"/big"), getLeg(b, "direct-tls", directTLS, onLinkTLS.URL+"/big")})
			reportRatio(b, legs, "front", "direct", "front/direct")
			reportRatio(b, legs, "front", "direct-tls", "front/direct-tls")
		})
	}
}
