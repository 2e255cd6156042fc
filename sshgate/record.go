package sshgate

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// A recording is kept in two forms. While the session runs, each chunk of
// output is appended to a temporary file as a frame (kind, time since the
// start, length, bytes): one buffered write, so the session never waits on
// encoding or on the network, and memory stays at one buffer whatever the
// output rate. The file is unlinked as soon as it is created, so a crash
// leaves nothing behind. When the session ends, the frames are converted
// to asciicast v2 while being streamed into the object store.

const (
	frameOutput = 'o'
	frameResize = 'r'
	// frameHeader is kind (1) + nanoseconds since start (8) + length (4).
	frameHeader = 13
	// maxFrame bounds one frame's payload; output chunks are at most the
	// 32 KiB io.Copy buffer.
	maxFrame = 1 << 20
	// recordBuffer is the write buffer of a running recording. It is held
	// for the whole session, idle or not, so it is small: interactive
	// output comes in small chunks it gathers, and a chunk larger than
	// what is left goes to the file in one write anyway
	// (BenchmarkIdleSessions).
	recordBuffer = 8 << 10
)

// recorder records one PTY session. Its Write never fails and never
// blocks on anything but the local disk: a recording problem is logged
// and the recording is cut, the session goes on.
type recorder struct {
	start  time.Time
	now    func() time.Time
	term   string
	width  int
	height int
	limit  int64

	// mu protects the following.
	mu        sync.Mutex
	f         *os.File
	w         *bufio.Writer
	recorded  int64 // output bytes recorded
	truncated bool  // output past limit was not recorded
	err       error // the first write error; nothing is recorded after it
}

// newRecorder starts a recording in dir for a terminal of the given size.
func newRecorder(dir, term string, width, height int, limit int64, now func() time.Time) (*recorder, error) {
	f, err := os.CreateTemp(dir, "gpuaas-recording-*")
	if err != nil {
		return nil, fmt.Errorf("start recording: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("start recording: %w", err)
	}
	if width <= 0 {
		width = 80
	}
	if height <= 0 {
		height = 24
	}
	return &recorder{start: now(), now: now, term: term, width: width, height: height, limit: limit,
		f: f, w: bufio.NewWriterSize(f, recordBuffer)}, nil
}

// Write records p as output. It always reports success.
func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil || r.truncated || len(p) == 0 {
		return len(p), nil
	}
	rec := p
	if room := r.limit - r.recorded; int64(len(rec)) > room {
		rec = rec[:room]
		r.truncated = true
	}
	for len(rec) > 0 {
		n := min(len(rec), maxFrame)
		r.frame(frameOutput, rec[:n])
		r.recorded += int64(n)
		rec = rec[n:]
	}
	return len(p), nil
}

// Resize records a terminal size change.
func (r *recorder) Resize(width, height int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.frame(frameResize, []byte(strconv.Itoa(width)+"x"+strconv.Itoa(height)))
	}
}

// frame appends one frame. Called with mu held.
func (r *recorder) frame(kind byte, payload []byte) {
	var hdr [frameHeader]byte
	hdr[0] = kind
	binary.BigEndian.PutUint64(hdr[1:9], uint64(r.now().Sub(r.start)))
	binary.BigEndian.PutUint32(hdr[9:13], uint32(len(payload)))
	if _, err := r.w.Write(hdr[:]); err != nil {
		r.err = err
		return
	}
	if _, err := r.w.Write(payload); err != nil {
		r.err = err
	}
}

// Err returns the error that stopped the recording, if any.
func (r *recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close releases the file (and with it the recording's disk space).
func (r *recorder) Close() error { return r.f.Close() }

// WriteAsciicast writes the recording as asciicast v2
// (https://docs.asciinema.org/manual/asciicast/v2/): a header line, then
// one JSON array per event — [seconds, "o", text] for output, [seconds,
// "r", "COLSxROWS"] for a resize, and a final [seconds, "m", label] marker
// when the recording was cut at the size limit. Output that splits a UTF-8
// sequence across chunks is joined first; bytes that are not UTF-8 at all
// become U+FFFD, as asciicast (JSON text) requires. Call it after the
// session's last Write.
func (r *recorder) WriteAsciicast(out io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return fmt.Errorf("recording: %w", r.err)
	}
	if err := r.w.Flush(); err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	header := struct {
		Version   int               `json:"version"`
		Width     int               `json:"width"`
		Height    int               `json:"height"`
		Timestamp int64             `json:"timestamp"`
		Env       map[string]string `json:"env,omitempty"`
	}{Version: 2, Width: r.width, Height: r.height, Timestamp: r.start.Unix()}
	if r.term != "" {
		header.Env = map[string]string{"TERM": r.term}
	}
	if err := writeJSONLine(bw, header); err != nil {
		return err
	}

	in := bufio.NewReaderSize(io.NewSectionReader(r.f, 0, 1<<62), 64<<10)
	var (
		hdr     [frameHeader]byte
		payload []byte
		pending []byte // the start of a UTF-8 sequence cut by the chunk boundary
		last    time.Duration
	)
	emit := func(at time.Duration, code, data string) error {
		return writeJSONLine(bw, []any{json.Number(strconv.FormatFloat(at.Seconds(), 'f', 6, 64)), code, data})
	}
	for {
		if _, err := io.ReadFull(in, hdr[:]); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("recording: read frame: %w", err)
		}
		at := time.Duration(binary.BigEndian.Uint64(hdr[1:9]))
		n := binary.BigEndian.Uint32(hdr[9:13])
		if n > maxFrame {
			return fmt.Errorf("recording: frame of %d bytes", n)
		}
		if cap(payload) < int(n) {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(in, payload); err != nil {
			return fmt.Errorf("recording: read frame: %w", err)
		}
		last = at
		switch hdr[0] {
		case frameOutput:
			data := append(pending, payload...)
			cut := completeUTF8(data)
			pending = append([]byte(nil), data[cut:]...)
			if cut > 0 {
				if err := emit(at, "o", string(data[:cut])); err != nil {
					return err
				}
			}
		case frameResize:
			// A pending partial sequence stays pending: the byte stream
			// goes on after the resize.
			if err := emit(at, "r", string(payload)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("recording: unknown frame kind %q", hdr[0])
		}
	}
	if len(pending) > 0 {
		if err := emit(last, "o", string(pending)); err != nil {
			return err
		}
	}
	if r.truncated {
		if err := emit(last, "m", fmt.Sprintf("recording cut at %d bytes of output", r.limit)); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// completeUTF8 returns the length of the longest prefix of b that does not
// end inside a UTF-8 sequence that more bytes could complete.
func completeUTF8(b []byte) int {
	// A sequence is at most 4 bytes: look back at most 3 for its start.
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if !utf8.RuneStart(b[i]) {
			continue
		}
		if !utf8.FullRune(b[i:]) {
			return i
		}
		break
	}
	return len(b)
}

func writeJSONLine(w *bufio.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("recording: encode: %w", err)
	}
	return nil
}
