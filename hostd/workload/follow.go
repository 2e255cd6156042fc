package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/gpuaas/gpuaas/internal/logstream"
)

// A container's output reaches LOGS from its k8s-file log, which conmon
// writes as the container's user (docs/decisions/0026-workload-logs-across-restarts.md):
// one record a line, "TIME STREAM TAG TEXT", TAG F for a whole line and P
// for the part of a longer one. The follower reads it by byte offset, so
// a hostd that restarts goes on from the offset of its last acknowledged
// line. conmon rotates the file past its max-size by renaming a new one
// over it: the follower finishes the open one, then reads the new one
// from its start.

// LogFollower feeds a container's log file to a pump, from a position.
type LogFollower struct {
	// Path is the container's log file; UID the user it must belong to
	// (hostd reads it as root from a directory the user controls: a file
	// not the user's own is refused).
	Path string
	UID  uint32
	Pump *logstream.Pump
	// From is where to start (a checkpoint's position; zero: the start).
	From logstream.Position
	// Ended is closed once the container has ended: the follower then
	// reads what is left and returns.
	Ended <-chan struct{}
	// Poll is how often the file is looked at for more (default 100ms).
	Poll time.Duration
	// Files is where the file is read: the node's (nil), or a guest's
	// through its environment (GuestLogFiles).
	Files LogFiles
}

// LogFiles opens and looks at a container's log file where it is.
type LogFiles interface {
	// Open opens path, refusing anything but a regular file of uid that
	// is not a symbolic link, and returns its inode.
	Open(path string, uid uint32) (LogFile, uint64, error)
	// Inode is path's inode now (0 when it is gone).
	Inode(path string) uint64
}

// LogFile is an open log file.
type LogFile interface {
	io.ReaderAt
	Size() (int64, error)
	Close() error
}

// nodeFiles are the node's files, read by hostd.
type nodeFiles struct{}

func (nodeFiles) Open(path string, uid uint32) (LogFile, uint64, error) {
	f, ino, err := openLog(path, uid)
	if err != nil {
		return nil, 0, err
	}
	return nodeFile{f}, ino, nil
}

func (nodeFiles) Inode(path string) uint64 { return inode(path) }

type nodeFile struct{ *os.File }

func (f nodeFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// ErrNotOwned refuses a log file that is not a regular file of the user.
var ErrNotOwned = errors.New("not a regular file of the container's user")

// openLog opens path, refusing a symbolic link at its end and anything
// but a regular file owned by uid, and returns its inode.
func openLog(path string, uid uint32) (*os.File, uint64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Uid != uid {
		_ = f.Close()
		return nil, 0, fmt.Errorf("log %s: %w", path, ErrNotOwned)
	}
	return f, st.Ino, nil
}

// inode is path's inode now (0 when it is gone).
func inode(path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

// Run follows the log until Ended is closed and everything written before
// is read (nil), or ctx ends (its error: hostd stops; the last checkpoint
// says where to go on).
func (lf *LogFollower) Run(ctx context.Context) error {
	poll := lf.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	files := lf.Files
	if files == nil {
		files = nodeFiles{}
	}
	f, ino, err := files.Open(lf.Path, lf.UID)
	if err != nil {
		return err
	}
	r := &recordReader{pump: lf.Pump, file: ino}
	switch {
	case lf.From.File != 0 && lf.From.File != ino:
		lf.Pump.Mark("the container's log file was rotated while hostd was not reading it: output written between may be missing here")
	case lf.From.File == ino:
		if size, err := f.Size(); err == nil && size < lf.From.Offset {
			lf.Pump.Mark("the container's log file is shorter than where hostd stopped reading it: output may be missing here")
		} else {
			r.off = lf.From.Offset
		}
	}
	defer func() { _ = f.Close() }()
	ended := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.readFrom(f); err != nil {
			return err
		}
		if now := files.Inode(lf.Path); now != 0 && now != ino {
			// Rotated: what the old file still had was read above.
			nf, nino, err := files.Open(lf.Path, lf.UID)
			if err != nil {
				return err
			}
			_ = f.Close()
			r.flush()
			f, ino = nf, nino
			r.file, r.off, r.buf = ino, 0, r.buf[:0]
			continue
		}
		if ended {
			r.flush()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-lf.Ended:
			ended = true // one more read: what conmon wrote before the end
		case <-time.After(poll):
		}
	}
}

// recordReader turns a log file's records into the pump's lines.
type recordReader struct {
	pump    *logstream.Pump
	file    uint64
	off     int64  // the file offset after the last whole record taken
	buf     []byte // read past off, not yet a whole record
	partial []byte // P records' text so far
	pstream string
	chunk   []byte
}

// maxPartial bounds a line gathered from P records: past it, what is
// gathered is a line of its own (split by the pump into lines of
// logstream.MaxLineBytes).
const maxPartial = 1 << 20

// flush adds what P records gathered as a line, the file being at r.off.
func (r *recordReader) flush() {
	if len(r.partial) > 0 {
		r.pump.Line(time.Time{}, r.pstream, string(r.partial), logstream.Position{File: r.file, Offset: r.off})
		r.partial = r.partial[:0]
	}
}

// readFrom reads f from r.off+len(r.buf) to its end.
func (r *recordReader) readFrom(f io.ReaderAt) error {
	if r.chunk == nil {
		r.chunk = make([]byte, 64<<10)
	}
	for {
		n, err := f.ReadAt(r.chunk, r.off+int64(len(r.buf)))
		if n > 0 {
			r.buf = append(r.buf, r.chunk[:n]...)
			r.records()
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
	}
}

// records takes the whole records in buf.
func (r *recordReader) records() {
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			return
		}
		rec := r.buf[:i]
		t, stream, full, text, ok := parseRecord(rec)
		if ok && len(r.partial) > 0 && r.pstream != stream {
			// The other stream's line began: the gathered one ends here,
			// before this record.
			r.flush()
		}
		r.buf = r.buf[i+1:]
		r.off += int64(i + 1)
		if !ok {
			continue
		}
		if !full {
			r.partial, r.pstream = append(r.partial, text...), stream
			if len(r.partial) >= maxPartial {
				r.flush()
			}
			continue
		}
		if len(r.partial) > 0 {
			text = append(r.partial, text...)
			r.partial = r.partial[:0]
		}
		r.pump.Line(t, stream, string(text), logstream.Position{File: r.file, Offset: r.off})
	}
}

// parseRecord reads one k8s-file record: "TIME STREAM TAG TEXT".
func parseRecord(rec []byte) (t time.Time, stream string, full bool, text []byte, ok bool) {
	f := bytes.SplitN(rec, []byte{' '}, 4)
	if len(f) < 3 {
		return t, "", false, nil, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(f[0]))
	if err != nil {
		return t, "", false, nil, false
	}
	switch string(f[1]) {
	case logstream.Stdout, logstream.Stderr:
		stream = string(f[1])
	default:
		return t, "", false, nil, false
	}
	tag := f[2]
	full = !bytes.HasPrefix(tag, []byte("P"))
	if len(f) == 4 {
		text = f[3]
	}
	return t, stream, full, text, true
}
