package sshwire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// sizedReader hands out its chunks one per Read (as a channel or a PTY
// does, a burst at a time) and records the size of every buffer it was
// given.
type sizedReader struct {
	chunks [][]byte
	bufs   []int
}

func (r *sizedReader) Read(p []byte) (int, error) {
	r.bufs = append(r.bufs, len(p))
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if n == len(r.chunks[0]) {
		r.chunks = r.chunks[1:]
	} else {
		r.chunks[0] = r.chunks[0][n:]
	}
	return n, nil
}

// TestCopyIdleHoldsSmallBuffer: an idle stream waits with a small buffer
// (BenchmarkIdleSessions: io.Copy held 32 KiB per direction per session);
// a burst gets a full one, given back when the burst is over.
func TestCopyIdleHoldsSmallBuffer(t *testing.T) {
	// The burst: its first KiB, three full big reads, a short one.
	burst := bytes.Repeat([]byte("x"), 3*copyBuffer+4<<10)
	r := &sizedReader{chunks: [][]byte{[]byte("$ "), burst, []byte("ls\r\n")}}
	var out bytes.Buffer
	n, err := Copy(&out, r)
	if err != nil || n != int64(out.Len()) {
		t.Fatalf("Copy = %d, %v; wrote %d", n, err, out.Len())
	}
	if want := "$ " + string(burst) + "ls\r\n"; out.String() != want {
		t.Fatalf("copied %d bytes, not what was read (%d bytes)", out.Len(), len(want))
	}
	// The prompt and the burst's first read with the small buffer, the
	// rest of the burst with a big one, its short last read giving it back.
	want := []int{idleBuffer, idleBuffer, copyBuffer, copyBuffer, copyBuffer, copyBuffer, idleBuffer, idleBuffer}
	if len(r.bufs) != len(want) {
		t.Fatalf("read buffers %v; want %v", r.bufs, want)
	}
	for i := range want {
		if r.bufs[i] != want[i] {
			t.Fatalf("read buffers %v; want %v", r.bufs, want)
		}
	}
}

// TestCopyErrors: a write error stops the copy with it, after what was
// written; a read error is returned, EOF is not.
func TestCopyErrors(t *testing.T) {
	boom := errors.New("boom")
	n, err := Copy(failingWriter{after: 3, err: boom}, bytes.NewReader([]byte("hello")))
	if n != 3 || !errors.Is(err, boom) {
		t.Fatalf("Copy to a failing writer = %d, %v; want 3, %v", n, err, boom)
	}
	n, err = Copy(io.Discard, io.MultiReader(bytes.NewReader([]byte("ab")), failingReader{boom}))
	if n != 2 || !errors.Is(err, boom) {
		t.Fatalf("Copy from a failing reader = %d, %v; want 2, %v", n, err, boom)
	}
}

type failingWriter struct {
	after int
	err   error
}

func (w failingWriter) Write(p []byte) (int, error) { return min(len(p), w.after), w.err }

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }
