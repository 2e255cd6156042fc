package httpfront

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
)

// Record coalescing on client connections. crypto/tls writes every
// record (at most 16 KiB of plaintext) to the connection on its own, so
// a proxied 256 KiB body write costs some 17 system calls and loopback
// or NIC segments, plus one more for the chunk's trailing CRLF at the
// flush. A corkConn sits under each client's tls.Conn (as sshlink's
// coalescer does under the link's): while an HTTP/1.x response write is
// passed on (the write and its flush, one call of corkedWriter.Write),
// the records TLS makes are gathered and sent with one write. Anything
// written outside that (handshakes, alerts, HTTP/2, an upgraded
// connection) goes straight through.
//
// Only HTTP/1.x is corked: its response is written by the handler's
// goroutine alone, which never waits on the client between begin and
// flush. HTTP/2 frames are written by the connection's own goroutines,
// and one of them held back while the handler waits for the client's
// flow-control window would never be sent.

// corkMax bounds what a corkConn gathers: a proxied write of
// copyBufferSize, its chunk header and trailer, and TLS's overhead per
// record (header, AEAD tag, content type). A larger gather is sent in
// parts.
const corkMax = copyBufferSize + 64<<10

var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, corkMax); return &b }}

// corkConn is a client's TCP connection under its tls.Conn.
type corkConn struct {
	net.Conn

	mu  sync.Mutex
	buf *[]byte // from corkPool while gathering; nil otherwise
	err error   // the first failed write while gathering
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return c.Conn.Write(p)
	}
	if c.err != nil {
		return 0, c.err
	}
	if len(*c.buf)+len(p) > corkMax {
		if err := c.sendLocked(); err != nil {
			return 0, err
		}
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

// sendLocked writes what was gathered.
func (c *corkConn) sendLocked() error {
	if len(*c.buf) > 0 {
		_, c.err = c.Conn.Write(*c.buf)
		*c.buf = (*c.buf)[:0]
	}
	return c.err
}

// begin starts gathering.
func (c *corkConn) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf, c.err = corkPool.Get().(*[]byte), nil
}

// flush sends what was gathered since begin and stops gathering.
func (c *corkConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.sendLocked()
	corkPool.Put(c.buf)
	c.buf = nil
	return err
}

// corkListener makes each accepted connection a corkConn.
type corkListener struct{ net.Listener }

func (l corkListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &corkConn{Conn: c}, nil
}

type corkKey struct{}

// corkContext is http.Server's ConnContext: it keeps the corkConn under
// a client's tls.Conn where corkWriter finds it.
func corkContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		if cc, ok := tc.NetConn().(*corkConn); ok {
			return context.WithValue(ctx, corkKey{}, cc)
		}
	}
	return ctx
}

// corkWriter is w corked for r's connection: each Write is written,
// flushed (as the proxy's FlushInterval -1 does after every write
// anyway) and sent in one system call. w as it is for HTTP/2 or a
// connection without a corkConn.
func corkWriter(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	cc, ok := r.Context().Value(corkKey{}).(*corkConn)
	if !ok || r.ProtoMajor != 1 {
		return w
	}
	return &corkedWriter{ResponseWriter: w, cc: cc, rc: http.NewResponseController(w)}
}

// corkedWriter is a response writer whose writes are corked; it keeps the
// rest of http.ResponseController's reach (Flush, Hijack) through Unwrap.
type corkedWriter struct {
	http.ResponseWriter
	cc *corkConn
	rc *http.ResponseController
}

func (w *corkedWriter) Write(p []byte) (n int, err error) {
	w.cc.begin()
	defer func() { // also when the write panics (http.ErrAbortHandler): never left gathering
		if ferr := w.cc.flush(); err == nil {
			err = ferr
		}
	}()
	n, err = w.ResponseWriter.Write(p)
	if err == nil {
		err = w.rc.Flush()
	}
	return n, err
}

// Unwrap gives http.ResponseController the writer beneath.
func (w *corkedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes the writer beneath.
func (w *corkedWriter) Flush() { _ = w.rc.Flush() }
