package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// crashedServerWait is how long Start waits for a live postmaster holding
// the data directory to go away: the server of a run that was killed gets
// SIGINT as its parent dies (Pdeathsig) and is still shutting down when
// the next run starts a moment later.
const crashedServerWait = 5 * time.Second

// waitLockFree is checkLockFile, waiting up to crashedServerWait for a
// live postmaster to exit.
func waitLockFree(ctx context.Context, path string, log *slog.Logger) error {
	deadline := time.Now().Add(crashedServerWait)
	logged := false
	for {
		err := checkLockFile(path, log)
		if !errors.Is(err, ErrAlreadyRunning) || time.Now().After(deadline) {
			return err
		}
		if !logged {
			logged = true
			log.Info("waiting for the PostgreSQL server of a previous run to stop", "lock", path)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
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
