package httpfront

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestUpgradeCopyIdleHoldsSmallBuffers: an upgraded connection proxied by
// httputil.ReverseProxy through the front's countingWriter waits for data
// with small buffers both ways (an idle WebSocket holds no 32 KiB copy
// buffer), still moves a burst larger than any buffer intact, and counts
// its bytes both ways.
func TestUpgradeCopyIdleHoldsSmallBuffers(t *testing.T) {
	backend := upgradeEchoServer(t)
	var toBackend, toClient pendingReads
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: "http", Host: backend}) },
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &recordingConn{Conn: c, reads: &toClient}, nil
		}},
	}
	var in, out atomic.Int64
	front := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy.ServeHTTP(&countingWriter{ResponseWriter: w, n: &out, in: &in}, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = front.Serve(&recordingListener{Listener: ln, reads: &toBackend}) }()
	t.Cleanup(func() { _ = front.Close() })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v; want 101", res, err)
	}
	echo := func(msg []byte) {
		t.Helper()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(br, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo of %d bytes: %d back equal=%v, %v", len(msg), len(got), bytes.Equal(got, msg), err)
		}
	}
	echo([]byte("hello"))

	// Idle: each copy waits in a read; its buffer is what an idle
	// connection holds.
	testutil.Eventually(t, "both copies waiting for data", func() bool {
		return toBackend.pending.Load() > 0 && toClient.pending.Load() > 0
	})
	for name, r := range map[string]*pendingReads{"client→node": &toBackend, "node→client": &toClient} {
		if n := r.pending.Load(); n > 1<<10 {
			t.Errorf("%s: an idle copy waits with a %d-byte buffer; want <= 1 KiB", name, n)
		}
	}

	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	echo(big)
	// The last write is counted just after the client has its bytes.
	want := int64(len("hello") + len(big))
	testutil.Eventually(t, "both directions counted", func() bool { return in.Load() == want && out.Load() == want })
	if n := toBackend.max.Load(); n <= 1<<10 {
		t.Errorf("a 1 MiB burst was read %d bytes at most at a time; want a larger buffer while data flows", n)
	}
}

// pendingReads records the buffer of the read in progress on a connection
// and the largest one.
type pendingReads struct{ pending, max atomic.Int64 }

type recordingConn struct {
	net.Conn
	reads *pendingReads
}

func (c *recordingConn) Read(p []byte) (int, error) {
	c.reads.pending.Store(int64(len(p)))
	if int64(len(p)) > c.reads.max.Load() {
		c.reads.max.Store(int64(len(p)))
	}
	n, err := c.Conn.Read(p)
	c.reads.pending.Store(0)
	return n, err
}

// recordingListener records the reads of the connections it accepts once
// the front has answered on them (the 101), so the server's own request
// reading is not counted.
type recordingListener struct {
	net.Listener
	reads *pendingReads
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &upgradedRecorder{Conn: c, reads: l.reads}, nil
}

// upgradedRecorder records every read after the first write (the 101).
type upgradedRecorder struct {
	net.Conn
	reads   *pendingReads
	written atomic.Bool
}

func (c *upgradedRecorder) Write(p []byte) (int, error) {
	c.written.Store(true)
	return c.Conn.Write(p)
}

func (c *upgradedRecorder) Read(p []byte) (int, error) {
	if !c.written.Load() {
		return c.Conn.Read(p)
	}
	return (&recordingConn{Conn: c.Conn, reads: c.reads}).Read(p)
}

// upgradeEchoServer answers an Upgrade request with 101 and echoes the
// upgraded connection; it returns its address.
func upgradeEchoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "echo") {
			http.Error(w, "upgrade: echo", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_, _ = io.Copy(conn, brw)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}
