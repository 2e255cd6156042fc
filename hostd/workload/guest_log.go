package workload

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// GuestLogFiles reads a guest container's log file inside the guest, as
// the guest's user, through the environment (a shell a read: `tail -c`),
// for a LogFollower. The file is read by its path, each read checking
// that the path is still the file opened: once conmon has rotated it, a
// read of the old one ends (what was written to it after the last read
// is not seen) and the follower goes on with the new one.
type GuestLogFiles struct {
	Podman Podman
	// Ctx bounds every read (the follower's).
	Ctx context.Context
}

var _ LogFiles = GuestLogFiles{}

// Open implements LogFiles: path must be a regular file of the guest's
// user (uid is not used: the guest's shell checks ownership with -O).
func (g GuestLogFiles) Open(path string, _ uint32) (LogFile, uint64, error) {
	q := quoteArgs([]string{path})
	r, err := g.read(nil, "if [ -f "+q+" ] && [ ! -L "+q+" ] && [ -O "+q+" ]; then stat -c %i -- "+q+"; else echo no; fi")
	if err != nil {
		return nil, 0, fmt.Errorf("log %s: %w", path, err)
	}
	if err := r.Err("log " + path); err != nil {
		return nil, 0, err
	}
	out := strings.TrimSpace(r.Stdout)
	if out == "no" {
		return nil, 0, fmt.Errorf("log %s: %w", path, ErrNotOwned)
	}
	ino, err := strconv.ParseUint(out, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("log %s: inode %q", path, out)
	}
	return &guestLogFile{g: g, path: path, ino: ino}, ino, nil
}

// Inode implements LogFiles.
func (g GuestLogFiles) Inode(path string) uint64 {
	r, err := g.read(nil, "stat -c %i -- "+quoteArgs([]string{path})+" 2>/dev/null || echo 0")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64)
	return n
}

type guestLogFile struct {
	g    GuestLogFiles
	path string
	ino  uint64
}

// same is a shell test that path is still the file opened.
func (f *guestLogFile) same() string {
	return `[ "$(stat -c %i -- ` + quoteArgs([]string{f.path}) + ` 2>/dev/null)" = ` + strconv.FormatUint(f.ino, 10) + ` ]`
}

// ReadAt implements io.ReaderAt: io.EOF with what there was when the file
// has fewer than len(p) bytes from off (or is no longer at its path).
func (f *guestLogFile) ReadAt(p []byte, off int64) (int, error) {
	q := quoteArgs([]string{f.path})
	r, err := f.g.read(nil, "if "+f.same()+"; then tail -c +"+strconv.FormatInt(off+1, 10)+" -- "+q+
		" | head -c "+strconv.Itoa(min(len(p), maxOutput))+"; fi")
	if err != nil {
		return 0, err
	}
	if err := r.Err("read log " + f.path); err != nil {
		return 0, err
	}
	n := copy(p, r.Stdout)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Size implements LogFile.
func (f *guestLogFile) Size() (int64, error) {
	r, err := f.g.read(nil, "stat -c %s -- "+quoteArgs([]string{f.path}))
	if err != nil {
		return 0, err
	}
	if err := r.Err("log size " + f.path); err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(r.Stdout), 10, 64)
}

// Close implements LogFile.
func (f *guestLogFile) Close() error { return nil }

// guestReadTimeout bounds one read of a guest's log file: the guest is
// the renter's, and a guest that answers with endless output (or none)
// must not hold the follower's goroutine beyond it.
var guestReadTimeout = 30 * time.Second

// read runs one command of the log reader in the guest under
// guestReadTimeout (Podman.shell keeps at most maxOutput of its output).
func (g GuestLogFiles) read(stdin io.Reader, command string) (Result, error) {
	ctx, cancel := context.WithTimeout(g.Ctx, guestReadTimeout)
	defer cancel()
	return g.Podman.shell(ctx, stdin, command)
}
