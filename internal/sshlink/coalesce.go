package sshlink

import (
	"net"
	"sync"
)

// coalescer sits under the tls.Conn. While a frame is written, the
// records TLS makes of it (one per 16 KiB of plaintext, plus a small one
// for a frame's tail) are gathered and sent with one write: one system
// call per frame instead of one per record. Anything TLS writes outside a
// frame (the handshake, alerts, close_notify) goes straight through.
type coalescer struct {
	net.Conn

	// mu protects buf.
	mu  sync.Mutex
	buf *[]byte // from sendPool while a frame is written; nil otherwise
}

// tlsRecordOverhead is what TLS 1.3 adds to each record: its header, the
// AEAD tag and the inner content type.
const tlsRecordOverhead = 5 + 16 + 1

// sendPool holds the buffers a frame's records are gathered in: a
// maximal frame (at most 5 records of 16 KiB) and the records' overhead.
var sendPool = sync.Pool{New: func() any {
	b := make([]byte, 0, headerLen+4+maxData+8*tlsRecordOverhead)
	return &b
}}

func (w *coalescer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf == nil {
		return w.Conn.Write(p)
	}
	*w.buf = append(*w.buf, p...)
	return len(p), nil
}

// begin starts gathering.
func (w *coalescer) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
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
	w.buf = nil
	return err
}
