package httpfront

import (
	"io"

	"github.com/gpuaas/gpuaas/gateway/core"
)

// Upgraded connections (WebSockets). httputil.ReverseProxy copies an
// upgraded connection both ways with io.Copy, which takes a 32 KiB buffer
// per direction for the connection's whole life unless the client's side
// of the copy brings its own: a reader's WriteTo, a writer's ReadFrom.
// The client's connection (countingConn, handed over by Hijack) brings
// both, each core.CopyStream (the node relays' copy): it waits for data
// with a 1 KiB buffer and takes a large one from a pool only while bytes
// flow, so an idle WebSocket holds 2 KiB of copy buffers, not 64 KiB. Both copies go
// through countingConn's Read and Write, so the exposure's byte counters
// (gpuaas_https_bytes_total) still count both ways; the node stream's
// own Read and Write still mark the allocation active.

// WriteTo copies from the client to w (the node stream) until the
// client's EOF: ReverseProxy's copy towards the backend.
func (c *countingConn) WriteTo(w io.Writer) (int64, error) {
	return core.CopyStream(w, readerOnly{c})
}

// ReadFrom copies r (the node stream) to the client until r's EOF:
// ReverseProxy's copy from the backend.
func (c *countingConn) ReadFrom(r io.Reader) (int64, error) {
	return core.CopyStream(writerOnly{c}, r)
}

// readerOnly and writerOnly hide countingConn's WriteTo and ReadFrom from
// the copies they serve (CopyStream uses neither; this keeps it so).
type readerOnly struct{ r io.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }

type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) { return w.w.Write(p) }
