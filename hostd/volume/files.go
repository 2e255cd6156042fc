package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// files is the backend of ext4 image files, Dir/<id>.img, attached
// through loop devices (docs/decisions/0016-volumes-ext4-images.md).
type files struct {
	dir    string
	runner host.Runner
}

func (b *files) path(id string) string { return filepath.Join(b.dir, id+".img") }

func (b *files) size(_ context.Context, id string) (int64, error) {
	fi, err := os.Stat(b.path(id))
	if err != nil {
		return 0, notFound(err)
	}
	return fi.Size(), nil
}

func (b *files) rounded(_ context.Context, size int64) (int64, error) { return size, nil }

// make preallocates the image (fallocate), so the node's disk has
// promised the volume its whole size and writes inside it can never fill
// the node's disk; mkfs.ext4 with no reserved blocks (-m 0: the renter
// gets the whole size) and no discard (it would punch the preallocation
// out again). The image is made under a temporary name and renamed when
// its filesystem is complete: a crash leaves no half-made volume.
func (b *files) make(ctx context.Context, id string, size int64) error {
	img := b.path(id)
	tmp := img + ".new"
	if err := b.makeImage(ctx, tmp, size); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, img); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// makeImage writes a preallocated file of size bytes at path with an
// empty ext4 filesystem in it.
func (b *files) makeImage(ctx context.Context, path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = allocate(f, 0, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("preallocate %d bytes: %w", size, err)
	}
	return mkfs(ctx, b.runner, path)
}

// mkfs makes an empty ext4 filesystem on path. 4 KiB blocks whatever the
// size: mke2fs.conf's "small" and "floppy" types give a filesystem under
// 512 MiB 1 KiB blocks, which it keeps when grown, and every 1 MiB write
// becomes 1,024 blocks to allocate and map (mke2fs(8) -b, mke2fs.conf(5)).
// No discard: an image's would punch its preallocation out, and an LV's
// blocks were discarded when the last volume on them was deleted.
func mkfs(ctx context.Context, r host.Runner, path string) error {
	_, err := r.Run(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-b", "4096",
		"-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", path)
	return err
}

// extend preallocates the image from old to size bytes.
func (b *files) extend(_ context.Context, id string, old, size int64) error {
	f, err := os.OpenFile(b.path(id), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = allocate(f, old, size-old)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("preallocate to %d bytes: %w", size, err)
	}
	return nil
}

// remove removes the image, which gives its blocks back to the node's
// filesystem (and, through it, discards them on the disk where that
// filesystem discards).
func (b *files) remove(_ context.Context, id string) error {
	img := b.path(id)
	for _, p := range []string{img + ".new", img} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// free is the room left on the filesystem of the directory for
// unprivileged writers, so volumes never take the reserve root keeps.
func (b *files) free(context.Context) (int64, error) {
	_, avail, err := fsSpace(b.dir)
	if err != nil {
		return 0, fmt.Errorf("free space of %s: %w", b.dir, err)
	}
	return avail, nil
}

func (b *files) ids(context.Context) ([]string, error) {
	ents, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".img")
		if ok && CheckID(id) == nil { // not a .new being made, nor foreign
			out = append(out, id)
		}
	}
	return out, nil
}

func (b *files) devices(id string) ([]string, error) { return loopsOf(b.path(id)) }

func (b *files) attach(ctx context.Context, id string) (string, error) {
	return attachLoop(ctx, b.runner, b.path(id))
}

// detach detaches the loop device; an autoclear one may have gone
// meanwhile, which is not an error. A device still open — its filesystem
// mounted in another mount namespace, or one being torn down — is only
// marked to clear itself by losetup -d (loop(4), LOOP_CLR_FD on an open
// device), and holds the image until its last user closes it: detach
// waits a little for that, then refuses (ErrMounted), so that nothing
// checks, mounts, lends, grows or deletes an image whose filesystem is
// still live.
func (b *files) detach(ctx context.Context, id, dev string) error {
	if _, err := b.runner.Run(ctx, "losetup", "-d", dev); err != nil {
		if still, lerr := loopsOf(b.path(id)); lerr != nil || contains(still, dev) {
			return err
		}
	}
	for wait := time.Duration(0); ; wait += loopReleasePoll {
		still, err := loopsOf(b.path(id))
		if err != nil {
			return err
		}
		if !contains(still, dev) {
			return nil
		}
		if wait >= loopReleaseWait {
			return fmt.Errorf("%w: %s still holds the image: its filesystem is mounted in another mount namespace", ErrMounted, dev)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(loopReleasePoll):
		}
	}
}

// How long detach waits for a loop device to let go of its image: a
// mount namespace that just ended releases its mounts a moment later.
const (
	loopReleaseWait = 3 * time.Second
	loopReleasePoll = 20 * time.Millisecond
)

func (b *files) refresh(ctx context.Context, dev string) error {
	_, err := b.runner.Run(ctx, "losetup", "--set-capacity", dev)
	return err
}
