package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// removeFilesOn walks the filesystem mounted at point.
func removeFilesOn(ctx context.Context, point string, uid, gid int) (int, error) {
	fd, err := unix.Open(point, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, ignoreGone(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return 0, err
	}
	w := &walker{ctx: ctx, uid: uint32(uid), gid: uint32(gid), dev: st.Dev, sem: make(chan struct{}, walkers)}
	w.dir(fd, point, make([]byte, direntBuf))
	w.wg.Wait()
	return w.n, errors.Join(w.errs...)
}

// walkers is how many goroutines walk a filesystem at once: a walk waits
// mostly on the disk (a node's datasets are rarely in the page cache).
const walkers = 8

// direntBuf is the size of the buffer each walking goroutine reads
// directory entries into.
const direntBuf = 32 << 10

// walker removes what uid owns below a directory, on one filesystem. It
// works from directory descriptors (openat, fstatat, unlinkat), which
// follow no link and cost less than a path each.
type walker struct {
	ctx      context.Context
	uid, gid uint32
	dev      uint64
	sem      chan struct{} // a slot per extra walking goroutine
	wg       sync.WaitGroup

	// mu protects n and errs.
	mu   sync.Mutex
	n    int
	errs []error
}

// dir walks the open directory fd (at path p, for errors) and closes it;
// buf is the calling goroutine's.
func (w *walker) dir(fd int, p string, buf []byte) {
	defer unix.Close(fd)
	if err := w.ctx.Err(); err != nil {
		w.fail(err, p, "")
		return
	}
	names, err := readNames(fd, buf)
	if err != nil {
		w.fail(err, p, "")
	}
	for _, name := range names {
		w.entry(fd, p, name, buf)
	}
}

// descend walks the subdirectory fd in a goroutine of its own when one is
// free, else in this one.
func (w *walker) descend(fd int, p string, buf []byte) {
	select {
	case w.sem <- struct{}{}:
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer func() { <-w.sem }()
			w.dir(fd, p, make([]byte, direntBuf))
		}()
	default:
		w.dir(fd, p, buf)
	}
}

// readNames lists the directory fd (getdents, "." and ".." left out).
func readNames(fd int, buf []byte) ([]string, error) {
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return names, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// entry looks at one name in the directory dfd.
func (w *walker) entry(dfd int, p, name string, buf []byte) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		w.fail(err, p, name)
		return
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case st.Dev != w.dev: // another filesystem mounted here: walked on its own
	case st.Mode&unix.S_IFMT == unix.S_IFCHR || st.Mode&unix.S_IFMT == unix.S_IFBLK:
	case st.Uid == w.uid && isDir:
		w.removeTree(dfd, p, name, buf)
	case st.Uid == w.uid:
		if err := unix.Unlinkat(dfd, name, 0); err != nil {
			w.fail(err, p, name)
		} else {
			w.count(1)
		}
	case isDir:
		if st.Gid == w.gid {
			w.chgrp(dfd, p, name)
		}
		sub, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			w.fail(err, p, name)
			return
		}
		w.descend(sub, filepath.Join(p, name), buf)
	case st.Gid == w.gid:
		w.chgrp(dfd, p, name)
	}
}

// chgrp gives a file of the user's group that another user owns to
// root's group.
func (w *walker) chgrp(dfd int, p, name string) {
	if err := unix.Fchownat(dfd, name, -1, 0, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		w.fail(err, p, name)
	}
}

// removeTree removes the directory name in dfd with all it holds,
// counting each entry, whoever owns it: a directory the user owned held
// only what it made or linked there.
func (w *walker) removeTree(dfd int, p, name string, buf []byte) {
	sub, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		w.fail(err, p, name)
		return
	}
	sp := filepath.Join(p, name)
	names, err := readNames(sub, buf)
	if err != nil {
		w.fail(err, p, name)
	}
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(sub, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			w.fail(err, sp, n)
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Dev == w.dev {
			w.removeTree(sub, sp, n, buf)
			continue
		}
		if err := unix.Unlinkat(sub, n, 0); err != nil {
			w.fail(err, sp, n)
		} else {
			w.count(1)
		}
	}
	_ = unix.Close(sub)
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil {
		w.fail(err, p, name)
	} else {
		w.count(1)
	}
}

// fail notes an error, unless the entry went meanwhile.
func (w *walker) fail(err error, p, name string) {
	if errors.Is(err, unix.ENOENT) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, fmt.Errorf("%s: %w", filepath.Join(p, name), err))
}

func (w *walker) count(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += n
}
