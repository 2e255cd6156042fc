package volume

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/pkg/sftp"
)

// tree is one side of a sync: this machine's files or a volume's over
// sftp. Paths use '/'.
type tree interface {
	// walk calls fn for everything under root (not root itself) with its
	// path relative to root, links not followed; fn returning fs.SkipDir
	// for a directory skips what it holds.
	walk(root string, fn func(rel string, fi fs.FileInfo) error) error
	stat(p string) (fs.FileInfo, error)
	open(p string) (io.ReadCloser, error)
	create(p string) (io.WriteCloser, error)
	mkdirAll(p string) error
	chtimes(p string, t time.Time) error
	// remove removes a file, a link (not what it points to) or an empty
	// directory.
	remove(p string) error
}

// localTree is this machine's filesystem.
type localTree struct{}

func (localTree) walk(root string, fn func(string, fs.FileInfo) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), fi)
	})
}

func (localTree) stat(p string) (fs.FileInfo, error)      { return os.Lstat(p) }
func (localTree) open(p string) (io.ReadCloser, error)    { return os.Open(p) }
func (localTree) create(p string) (io.WriteCloser, error) { return os.Create(p) }
func (localTree) mkdirAll(p string) error                 { return os.MkdirAll(p, 0o755) }
func (localTree) chtimes(p string, t time.Time) error     { return os.Chtimes(p, t, t) }
func (localTree) remove(p string) error                   { return os.Remove(p) }

// remoteTree is a volume over sftp.
type remoteTree struct{ c *sftp.Client }

func (r remoteTree) walk(root string, fn func(string, fs.FileInfo) error) error {
	w := r.c.Walk(root)
	for w.Step() {
		if err := w.Err(); err != nil {
			return err
		}
		if w.Path() == path.Clean(root) {
			continue
		}
		rel, err := filepath.Rel(path.Clean(root), w.Path())
		if err != nil {
			return err
		}
		err = fn(filepath.ToSlash(rel), w.Stat())
		if errors.Is(err, fs.SkipDir) && w.Stat().IsDir() {
			w.SkipDir()
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r remoteTree) stat(p string) (fs.FileInfo, error) { return r.c.Lstat(p) }
func (r remoteTree) open(p string) (io.ReadCloser, error) {
	return r.c.Open(p)
}
func (r remoteTree) create(p string) (io.WriteCloser, error) { return r.c.Create(p) }
func (r remoteTree) mkdirAll(p string) error                 { return r.c.MkdirAll(p) }
func (r remoteTree) chtimes(p string, t time.Time) error     { return r.c.Chtimes(p, t, t) }
func (r remoteTree) remove(p string) error                   { return r.c.Remove(p) }
