package sshlink

import (
	"crypto/tls"
	"net"
	"sync"
)

// coalescer sits under the tls.Conn. While a frame is written (hold), the
// records TLS makes of it (one per 16 KiB of plaintext, plus a small one
// for a frame's tail) are gathered and sent with one write: one system
// call per frame instead of one per record. Anything TLS writes outside a
// frame (the handshake, alerts, close_notify) goes straight through.
type coalescer struct {
	net.Conn

	// mu protects the following.
	mu   sync.Mutex
	hold bool
	buf  *[]byte // from sendPool while holding
}

// sendPool holds the buffers a frame's records are gathered in: a
// maximal frame, and the records' headers and tags.
var sendPool = sync.Pool{New: func() any {
	b := make([]byte, 0, headerLen+4+maxData+8*(5+16+1))
	return &b
}}

func (w *coalescer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.hold {
		return w.Conn.Write(p)
	}
	*w.buf = append(*w.buf, p...)
	return len(p), nil
}

// begin starts gathering.
func (w *coalescer) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold = true
	w.buf = sendPool.Get().(*[]byte)
}

// flush sends what was gathered since begin and stops gathering.
func (w *coalescer) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	if len(*w.buf) > 0 {
		_, err = w.Conn.Write(*w.buf)
	}
	*w.buf = (*w.buf)[:0]
	sendPool.Put(w.buf)
	w.hold, w.buf = false, nil
	return err
}

// coalescerOf is the coalescer under nc, nil when there is none.
func coalescerOf(nc net.Conn) *coalescer {
	if tc, ok := nc.(*tls.Conn); ok {
		co, _ := tc.NetConn().(*coalescer)
		return co
	}
	return nil
}
