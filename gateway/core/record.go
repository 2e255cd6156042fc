package core

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// A recording is kept in two forms. While the session runs, each chunk of
// output is appended to a file as a frame (kind, time since the start,
// length, bytes): one buffered write, so the session never waits on
// encoding or on the network, and memory stays at one buffer whatever the
// output rate. When the session ends, the frames are converted to
// asciicast v2 while being streamed into the object store.
//
// With a spool (a sessionID given to NewRecorder) the file is named after the session
// and starts with a header frame, so what a crash leaves behind can be
// uploaded when the gateway starts again (spool.go); what is buffered
// reaches the file within spoolFlush, so a crash loses at most the last
// moment of output. Without one the file is unlinked as soon as it is
// created and a crash loses it.

const (
	frameOutput = 'o'
	frameResize = 'r'
	frameHeader = 'h' // a spooled recording's first frame: spoolHeader as JSON
	// frameHead is kind (1) + nanoseconds since start (8) + length (4).
	frameHead = 13
	// maxFrame bounds one frame's payload; output chunks are at most the
	// 32 KiB io.Copy buffer.
	maxFrame = 1 << 20
	// recordBuffer is the write buffer of a running recording, held from
	// a frame to the next flush (a spooled recording's, within spoolFlush:
	// see Recorder.writer). It is small: interactive output comes in small
	// chunks it gathers, and a chunk larger than what is left goes to the
	// file in one write anyway (BenchmarkIdleSessions).
	recordBuffer = 8 << 10
	// spoolFlush is how often a spooled recording's buffer reaches the
	// disk while output flows: what a crash can lose.
	spoolFlush = time.Second
)

// Recorder records one PTY session. Its Write never fails and never
// blocks on anything but the local disk: a recording problem is logged
// and the recording is cut, the session goes on.
type Recorder struct {
	start  time.Time
	now    func() time.Time
	term   string
	width  int
	height int
	limit  int64

	// path is the spool file, empty for an unlinked one.
	path string
	// recovered says the recording was found in the spool after a crash:
	// it may end in a partial frame, and its cast says it was cut.
	recovered bool

	// mu protects the following.
	mu        sync.Mutex
	f         *os.File
	w         *bufio.Writer // nil when nothing is buffered: see writer
	flushed   time.Time     // when w was last flushed (spooled recordings)
	flushLate *time.Timer   // flushes what a quiet session left buffered
	closed    bool
	recorded  int64 // output bytes recorded
	truncated bool  // output past limit was not recorded
	err       error // the first write error; nothing is recorded after it
}

// NewRecorder starts a recording in dir for a terminal of the given size:
// the spool file of session sessionID, or an unlinked temporary file when
// sessionID is empty.
func NewRecorder(dir, sessionID, term string, width, height int, limit int64, now func() time.Time) (*Recorder, error) {
	if width <= 0 {
		width = 80
	}
	if height <= 0 {
		height = 24
	}
	r := &Recorder{start: now(), now: now, term: term, width: width, height: height, limit: limit}
	var err error
	if sessionID == "" {
		if r.f, err = os.CreateTemp(dir, "gpuaas-recording-*"); err != nil {
			return nil, fmt.Errorf("start recording: %w", err)
		}
		if err := os.Remove(r.f.Name()); err != nil {
			r.f.Close()
			return nil, fmt.Errorf("start recording: %w", err)
		}
		return r, nil
	}
	r.path = SpoolPath(dir, sessionID)
	if r.f, err = os.OpenFile(r.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
		return nil, fmt.Errorf("start recording: %w", err)
	}
	hdr, _ := json.Marshal(spoolHeader{Term: term, Width: width, Height: height, Start: r.start.UnixNano(), Limit: limit})
	r.frame(frameHeader, hdr)
	if r.err == nil {
		r.err = r.flush()
	}
	if r.err != nil {
		r.f.Close()
		_ = os.Remove(r.path)
		return nil, fmt.Errorf("start recording: %w", r.err)
	}
	r.flushed = r.now()
	return r, nil
}

// Write records p as output. It always reports success.
func (r *Recorder) Write(p []byte) (int, error) {
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
	r.flushSpool()
	return len(p), nil
}

// flushSpool writes a spooled recording's buffer to its file when the last
// flush is spoolFlush old, or else has it written spoolFlush from now (a
// session that falls quiet writes nothing more to trigger it). Called with
// mu held.
func (r *Recorder) flushSpool() {
	if r.path == "" || r.err != nil || r.closed {
		return
	}
	if now := r.now(); now.Sub(r.flushed) >= spoolFlush {
		r.flushed = now
		if err := r.flush(); err != nil {
			r.err = err
		}
		return
	}
	if r.flushLate == nil && r.w != nil && r.w.Buffered() > 0 {
		r.flushLate = time.AfterFunc(spoolFlush, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.flushLate = nil
			if r.err == nil && !r.closed {
				r.flushed = r.now()
				if err := r.flush(); err != nil {
					r.err = err
				}
			}
		})
	}
}

// writer is the recording's write buffer, taken from a pool on the first
// frame after a flush: a quiet session, whose spooled recording is flushed
// within spoolFlush, holds none (BenchmarkIdleSessions). Called with mu
// held.
func (r *Recorder) writer() *bufio.Writer {
	if r.w == nil {
		r.w = recordWriters.Get().(*bufio.Writer)
		r.w.Reset(r.f)
	}
	return r.w
}

// flush writes what is buffered to the file and gives the buffer back.
// Called with mu held.
func (r *Recorder) flush() error {
	if r.w == nil {
		return nil
	}
	if err := r.w.Flush(); err != nil {
		return err // the writer keeps its error: not given back
	}
	r.w.Reset(nil)
	recordWriters.Put(r.w)
	r.w = nil
	return nil
}

var recordWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, recordBuffer) }}

// Resize records a terminal size change.
func (r *Recorder) Resize(width, height int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.frame(frameResize, []byte(strconv.Itoa(width)+"x"+strconv.Itoa(height)))
		r.flushSpool()
	}
}

// frame appends one frame. Called with mu held.
func (r *Recorder) frame(kind byte, payload []byte) {
	var hdr [frameHead]byte
	hdr[0] = kind
	binary.BigEndian.PutUint64(hdr[1:9], uint64(r.now().Sub(r.start)))
	binary.BigEndian.PutUint32(hdr[9:13], uint32(len(payload)))
	w := r.writer()
	if _, err := w.Write(hdr[:]); err != nil {
		r.err = err
		return
	}
	if _, err := w.Write(payload); err != nil {
		r.err = err
	}
}

// Recorded is how many output bytes the recording holds.
func (r *Recorder) Recorded() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recorded
}

// Err returns the error that stopped the recording, if any.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close releases the file. A spool file stays on disk (for the next start
// to recover) until Remove.
func (r *Recorder) Close() error {
	r.mu.Lock()
	r.closed = true
	if r.flushLate != nil {
		r.flushLate.Stop()
		r.flushLate = nil
	}
	r.mu.Unlock()
	return r.f.Close()
}

// Remove closes the file and deletes it from the spool.
func (r *Recorder) Remove() error {
	err := r.Close()
	if r.path != "" {
		if rmErr := os.Remove(r.path); rmErr != nil && !os.IsNotExist(rmErr) {
			err = errors.Join(err, rmErr)
		}
	}
	return err
}

// WriteAsciicast writes the recording as asciicast v2
// (https://docs.asciinema.org/manual/asciicast/v2/): a header line, then
// one JSON array per event — [seconds, "o", text] for output, [seconds,
// "r", "COLSxROWS"] for a resize, and a final [seconds, "m", label] marker
// when the recording was cut at the size limit, or when it was recovered
// after the gateway stopped in the middle of it. Output that splits a UTF-8
// sequence across chunks is joined first; bytes that are not UTF-8 at all
// become U+FFFD, as asciicast (JSON text) requires. Call it after the
// session's last Write.
func (r *Recorder) WriteAsciicast(out io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return fmt.Errorf("recording: %w", r.err)
	}
	if err := r.flush(); err != nil {
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
		hdr     [frameHead]byte
		payload []byte
		pending []byte // the start of a UTF-8 sequence cut by the chunk boundary
		last    time.Duration
	)
	emit := func(at time.Duration, code, data string) error {
		return writeJSONLine(bw, []any{json.Number(strconv.FormatFloat(at.Seconds(), 'f', 6, 64)), code, data})
	}
	for {
		if _, err := io.ReadFull(in, hdr[:]); err == io.EOF || (err == io.ErrUnexpectedEOF && r.recovered) {
			break // (a crash may have cut the last frame)
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
		if _, err := io.ReadFull(in, payload); err == io.ErrUnexpectedEOF && r.recovered {
			break
		} else if err != nil {
			return fmt.Errorf("recording: read frame: %w", err)
		}
		if hdr[0] == frameHeader {
			continue
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
	if r.recovered {
		if err := emit(last, "m", "recording ends here: the gateway stopped without ending the session"); err != nil {
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
