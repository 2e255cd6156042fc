package sshwire

import (
	"errors"
	"io"
	"sync"
)

// HalfCloser is a stream that can send EOF and keep reading: an SSH
// channel, a *net.TCPConn.
type HalfCloser interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// HalfWriter is what CopyHalf writes to: a stream that can send EOF.
type HalfWriter interface {
	io.Writer
	CloseWrite() error
}

// CopyHalf copies src to dst until src's EOF (or an error either side),
// then passes the EOF on, so that a half-closed stream stays half-closed
// end to end. It returns the bytes copied.
//
// It is flow-controlled: Copy holds one buffer and blocks on dst, so a
// slow reader behind dst (an SSH channel's closed window, a full TCP
// buffer) stops the reading of src rather than anything piling up here.
func CopyHalf(dst HalfWriter, src io.Reader) int64 {
	n, _ := Copy(dst, src)
	_ = dst.CloseWrite()
	return n
}

// Splice copies both ways between a and b (CopyHalf each way), closes
// both once both directions are done, and returns the bytes copied in
// both directions together.
func Splice(a, b HalfCloser) int64 {
	var wg sync.WaitGroup
	var ab, ba int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		ba = CopyHalf(a, b)
	}()
	go func() {
		defer wg.Done()
		ab = CopyHalf(b, a)
	}()
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
	return ab + ba
}

// Copy copies src to dst until src's EOF or an error, like io.Copy, but
// holds a large buffer only while data flows. It waits for data with a
// small buffer of its own; a read that fills it (more is likely waiting)
// takes a copyBuffer from a pool for the following reads, and a read that
// does not fill that (the burst is over) gives it back before the next
// wait. An idle stream thus holds idleBuffer bytes, not 32 KiB.
//
// Backpressure is io.Copy's: one read, then its write, which blocks on
// dst; nothing else is buffered. Copy never uses src's WriterTo or dst's
// ReaderFrom (which would allocate their own buffers).
func Copy(dst io.Writer, src io.Reader) (written int64, err error) {
	small := make([]byte, idleBuffer)
	buf := small
	var big *[]byte
	defer func() {
		if big != nil {
			copyBuffers.Put(big)
		}
	}()
	for {
		nr, er := src.Read(buf)
		if nr > 0 {
			nw, ew := dst.Write(buf[:nr])
			if nw < 0 || nr < nw {
				nw, ew = 0, errInvalidWrite
			}
			written += int64(nw)
			if ew != nil {
				return written, ew
			}
			if nr != nw {
				return written, io.ErrShortWrite
			}
		}
		if er != nil {
			if er == io.EOF {
				er = nil
			}
			return written, er
		}
		switch {
		case big == nil && nr == len(buf):
			big = copyBuffers.Get().(*[]byte)
			buf = *big
		case big != nil && nr < len(buf):
			copyBuffers.Put(big)
			big, buf = nil, small
		}
	}
}

// idleBuffer is what Copy holds while its stream is idle: enough for
// interactive traffic (keystrokes, a prompt, a line of output).
const idleBuffer = 1 << 10

// copyBuffer is the size of the buffers Copy takes while data flows:
// one frame's payload on the gateway link (internal/sshlink's maxData),
// so a copy into a link channel writes whole frames, each one TLS write
// and one system call: io.Copy's 32 KiB made twice as many
// (BenchmarkLinkWriteSize; strace -c, per 256 MiB: 12,681 writes at 32
// KiB, 6,538 at 64 KiB). An x/crypto channel splits it into its 32 KiB
// packets as before.
const copyBuffer = 64 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBuffer); return &b }}

var errInvalidWrite = errors.New("invalid write result")
