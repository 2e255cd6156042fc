package httpfront

import "sync"

// Buffer sizes of the proxy's data path. A response body moves stream →
// http.Transport's reader → ReverseProxy's copy buffer → the client's
// TLS connection, and with FlushInterval -1 (and always for chunked and
// event-stream bodies, net/http/httputil's own rule) every read of the
// copy is written and flushed on its own. A read returns at most what the
// buffer holds and what the node stream has received (up to its channel
// window: 2 MiB), so the buffer's size sets how many writes, flushes, TLS
// records' syscalls and chunk headers a body costs: io.Copy's 32 KiB
// made them per 32 KiB or less (the Transport's 4 KiB reader split reads
// further). While little arrives, reads stay small and each is still
// flushed at once (server-sent events, streamed tokens).
//
// http.Transport's own reader and writer on a node stream stay at their
// 4 KiB: they live as long as the stream, and an upgraded connection
// (an idle WebSocket) keeps its stream for hours; 64 KiB ones showed no
// throughput gain on a loaded machine (bench/README).
const (
	// copyBufferSize is ReverseProxy's copy buffer, pooled: held only
	// while a body is copied.
	copyBufferSize = 256 << 10
)

// bufferPool is ReverseProxy's httputil.BufferPool: copyBufferSize
// buffers kept in a sync.Pool.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}}
}

// Get returns a copyBufferSize buffer.
func (bp *bufferPool) Get() []byte { return *bp.p.Get().(*[]byte) }

// Put takes back a buffer Get returned (others are dropped).
func (bp *bufferPool) Put(b []byte) {
	if cap(b) != copyBufferSize {
		return
	}
	b = b[:copyBufferSize]
	bp.p.Put(&b)
}
