package httpfront

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// writeCounter counts the writes to its connections.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, n: &l.writes}, nil
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// unused stands for the front's dependencies the handler under test
// never reaches.
type unused struct {
	Core
	Verdicts
	Links
}

// corkFront serves handler on the front's own http.Server (its
// ConnContext and Serve's listener) over a listener counting writes,
// and returns a client for it (HTTP/2 when h2).
func corkFront(t *testing.T, handler http.HandlerFunc, h2 bool) (*writeCounter, *http.Client, string) {
	t.Helper()
	ca, err := LoadOrCreateDevCA(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var u unused
	s, err := New(Config{Core: u, Verdicts: u, Links: u, Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now)})
	if err != nil {
		t.Fatal(err)
	}
	s.srv.Handler = handler
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wc := &writeCounter{Listener: ln}
	go func() { _ = s.Serve(wc) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "x.localhost"}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return wc, &http.Client{Transport: tr, Timeout: 30 * time.Second}, "https://" + ln.Addr().String()
}

// TestCorkedWriteIsOneSystemCall: an HTTP/1.1 response write through
// corkWriter of 256 KiB (16 TLS records, chunked) reaches the client's
// connection in one write, headers included, and a later small write
// (a server-sent event) arrives at once while the handler still runs:
// nothing is held back after a Write returns.
func TestCorkedWriteIsOneSystemCall(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB: a multiple of the record size
	var during atomic.Int64
	release := make(chan struct{})
	var wc *writeCounter
	wc, c, url := corkFront(t, func(w http.ResponseWriter, r *http.Request) {
		w = corkWriter(w, r)
		before := wc.writes.Load()
		if _, err := w.Write(big); err != nil {
			t.Error(err)
		}
		during.Store(wc.writes.Load() - before)
		if _, err := w.Write([]byte("data: tick\n\n")); err != nil {
			t.Error(err)
		}
		_ = http.NewResponseController(w).Flush() // as the proxy does after every write
		<-release
	}, false)
	defer close(release) // before the front's shutdown, which waits for the handler
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make([]byte, len(big))
	if _, err := io.ReadFull(resp.Body, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("body: %v; want the 256 KiB written", err)
	}
	tick := make([]byte, len("data: tick\n\n"))
	if _, err := io.ReadFull(resp.Body, tick); err != nil || string(tick) != "data: tick\n\n" {
		t.Fatalf("event: got %q, %v; want it before the handler returns", tick, err)
	}
	if n := during.Load(); n != 1 {
		t.Fatalf("a 256 KiB response write took %d writes to the connection; want 1", n)
	}
}

// TestCorkSkipsHTTP2: HTTP/2 responses are written by the connection's
// own goroutines and are never corked; a large one still arrives whole.
func TestCorkSkipsHTTP2(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	_, c, url := corkFront(t, func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("got HTTP/%d; want HTTP/2", r.ProtoMajor)
		}
		if cw := corkWriter(w, r); cw != w {
			t.Error("an HTTP/2 response was corked")
		}
		_, _ = w.Write(big)
	}, true)
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("got %d bytes, %v; want 1 MiB", len(got), err)
	}
}
