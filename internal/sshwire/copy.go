package sshwire

import (
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
// It is flow-controlled: io.Copy holds one buffer and blocks on dst, so a
// slow reader behind dst (an SSH channel's closed window, a full TCP
// buffer) stops the reading of src rather than anything piling up here.
func CopyHalf(dst HalfWriter, src io.Reader) int64 {
	n, _ := io.Copy(dst, src)
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
