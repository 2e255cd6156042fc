package logstream

import (
	"bytes"
	"sync"
)

// lineWriter splits one stream's output into lines for its Pump: a line
// ends at '\n' (a trailing '\r' is dropped), or at MaxLineBytes, or when
// the pump closes.
type lineWriter struct {
	p      *Pump
	stream string
	// mu protects partial.
	mu      sync.Mutex
	partial []byte
}

// Write takes output; it never fails and never waits for the bus.
func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.partial = append(w.partial, b...)
			for len(w.partial) >= MaxLineBytes {
				w.emit(w.partial[:MaxLineBytes], MaxLineBytes)
				w.partial = append(w.partial[:0], w.partial[MaxLineBytes:]...)
			}
			break
		}
		w.partial = append(w.partial, b[:i]...)
		b = b[i+1:]
		for len(w.partial) > MaxLineBytes {
			w.emit(w.partial[:MaxLineBytes], MaxLineBytes)
			w.partial = append(w.partial[:0], w.partial[MaxLineBytes:]...)
		}
		w.emit(bytes.TrimSuffix(w.partial, []byte{'\r'}), int64(len(w.partial))+1)
		w.partial = w.partial[:0]
	}
	return n, nil
}

func (w *lineWriter) emit(text []byte, size int64) { w.p.add(w.stream, string(text), size) }

// flush sends a last line without its newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.emit(w.partial, int64(len(w.partial)))
		w.partial = w.partial[:0]
	}
}
