package guestimage

import (
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
)

// The minimal guest's initramfs is a gzip-compressed cpio archive in the
// "newc" format, the one the kernel unpacks into its root filesystem
// (https://docs.kernel.org/driver-api/early-userspace/buffer-format.html).
// It is written here rather than by cpio(1) so that no file needs to be
// owned by root on the build host: every entry is root's in the archive,
// whoever builds it.

// cpioEntry is one file, directory, symbolic link or device node of the
// archive, by its path in the guest (no leading slash).
type cpioEntry struct {
	path string
	mode fs.FileMode // type bits and permissions
	data []byte      // a file's content or a link's target
	// major and minor number of a device node.
	major, minor uint32
}

// cpioMode is the Unix st_mode of m (type bits from sys/stat.h).
func cpioMode(m fs.FileMode) (uint32, error) {
	perm := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		perm |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		perm |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		perm |= 0o1000
	}
	switch {
	case m.IsRegular():
		return 0o100000 | perm, nil
	case m.IsDir():
		return 0o040000 | perm, nil
	case m&fs.ModeSymlink != 0:
		return 0o120000 | 0o777, nil
	case m&fs.ModeCharDevice != 0:
		return 0o020000 | perm, nil
	case m&fs.ModeDevice != 0:
		return 0o060000 | perm, nil
	}
	return 0, fmt.Errorf("cpio: unsupported file mode %v", m)
}

// writeCPIO writes entries, sorted by path with every parent directory
// before its children, as a gzip-compressed newc archive. The output
// depends only on the entries: times are zero and gzip carries no name or
// time, so the same inputs give the same bytes (and the same digest).
func writeCPIO(w io.Writer, entries []cpioEntry) error {
	sorted := append([]cpioEntry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].path < sorted[j].path })
	seen := map[string]bool{}
	for _, e := range sorted {
		if e.path == "" || strings.HasPrefix(e.path, "/") || strings.Contains(e.path, "..") {
			return fmt.Errorf("cpio: bad path %q", e.path)
		}
		if seen[e.path] {
			return fmt.Errorf("cpio: %s listed twice", e.path)
		}
		seen[e.path] = true
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	ino := uint32(1)
	for _, e := range sorted {
		mode, err := cpioMode(e.mode)
		if err != nil {
			return fmt.Errorf("%s: %w", e.path, err)
		}
		nlink := uint32(1)
		if e.mode.IsDir() {
			nlink = 2
		}
		if err := writeCPIOHeader(zw, ino, mode, nlink, e.major, e.minor, uint32(len(e.data)), e.path); err != nil {
			return err
		}
		if err := writePadded(zw, e.data); err != nil {
			return err
		}
		ino++
	}
	// The trailer is an empty entry named TRAILER!!!.
	if err := writeCPIOHeader(zw, 0, 0, 1, 0, 0, 0, "TRAILER!!!"); err != nil {
		return err
	}
	return zw.Close()
}

// writeCPIOHeader writes a newc header and the name, padded to four bytes.
func writeCPIOHeader(w io.Writer, ino, mode, nlink, major, minor, size uint32, name string) error {
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize (with its NUL), check.
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, major, minor, len(name)+1, 0)
	// The 110-byte header plus the name and its NUL are padded together.
	return writePadded(w, append([]byte(hdr+name), 0))
}

// writePadded writes b and zeros up to the next multiple of four bytes.
func writePadded(w io.Writer, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	if pad := (4 - len(b)%4) % 4; pad > 0 {
		if _, err := w.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	return nil
}
