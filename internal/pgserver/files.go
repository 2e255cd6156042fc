package pgserver

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// logTailLines is how much of the log an error message quotes.
const logTailLines = 20

// socketLock is the lock file postgres keeps beside its socket in dir.
func socketLock(dir string) string {
	return filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d.lock", Port))
}

// checkLockFile fails with ErrAlreadyRunning if the lock file at path (one of
// postgres's: postmaster.pid or the socket's) names a live postmaster. One
// naming a dead process is left to postgres, which removes it after checking
// that no orphaned backend still uses the shared memory. One naming a live
// process that is not postgres, its pid reused after a crash or a container
// restart, is removed here: postgres would refuse to start because of it.
func checkLockFile(path string, log *slog.Logger) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read lock file: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return nil // postgres explains a damaged lock file better than we could
	}
	switch processState(pid) {
	case processGone:
		return nil
	case processPostgres:
		return fmt.Errorf("%w: pid %d holds %s", ErrAlreadyRunning, pid, path)
	}
	log.Warn("removing stale PostgreSQL lock file", "path", path, "pid", pid)
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale lock file: %w", err)
	}
	return nil
}

type procState int

const (
	processGone procState = iota
	processPostgres
	processOther
)

// processState says whether pid is alive and, where /proc tells, whether it
// is postgres. Without /proc (macOS) any live process counts as postgres.
func processState(pid int) procState {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return processGone
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return processPostgres
	}
	switch strings.TrimSpace(string(comm)) {
	case "postgres", "postmaster":
		return processPostgres
	}
	return processOther
}

// openLog opens path for appending, giving it to owner (when not nil) so that
// it stays with the cluster.
func openLog(path string, owner *account) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	if owner != nil {
		if err := f.Chown(int(owner.uid), int(owner.gid)); err != nil {
			f.Close()
			return nil, fmt.Errorf("open log: %w", err)
		}
	}
	return f, nil
}

// logTail returns, for an error message, the last lines written to the log at
// path since offset.
func logTail(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log %s: %v)", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(log %s: %v)", path, err)
	}
	start := max(offset, fi.Size()-16<<10)
	b, err := io.ReadAll(io.NewSectionReader(f, start, fi.Size()-start))
	if err != nil {
		return fmt.Sprintf("(log %s: %v)", path, err)
	}
	text := strings.TrimRight(string(b), "\n")
	if text == "" {
		return fmt.Sprintf("(log %s: nothing written)", path)
	}
	lines := strings.Split(text, "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return fmt.Sprintf("last lines of %s:\n\t%s", path, strings.Join(lines, "\n\t"))
}
