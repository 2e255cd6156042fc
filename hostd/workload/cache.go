// Package workload runs an allocation's workloads on the node: images
// pulled by digest into a per-node cache, loaded into the renter's own
// rootless podman storage and run there as the allocation's POSIX user
// (docs/decisions/0021-workloads-on-the-node.md, docs/apps.md).
package workload

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gpuaas/gpuaas/internal/api"
)

// ErrNoDigest refuses an image reference that is not pinned by digest:
// workloads run exactly what the catalog verified, never a tag.
var ErrNoDigest = errors.New("image reference has no digest")

// ParseRef reads REGISTRY/REPOSITORY@sha256:…; a tag, or no registry, is
// refused.
func ParseRef(ref string) (name.Digest, error) {
	if !strings.Contains(ref, "@sha256:") {
		return name.Digest{}, api.Errorf(api.CodeInvalidArgument, "image %q: %v", ref, ErrNoDigest).
			WithHint("give REGISTRY/REPOSITORY@sha256:…")
	}
	d, err := name.NewDigest(ref, name.StrictValidation)
	if err != nil {
		return name.Digest{}, api.Errorf(api.CodeInvalidArgument, "image %q: %v", ref, err)
	}
	return d, nil
}

// Cache is the node's image cache: one OCI image layout per manifest
// digest under Dir (hostd's own, mode 0700: tenants read an image only
// through what hostd streams into their own podman, Archive). An image
// is pulled once per node; later starts of the same digest use the copy.
type Cache struct {
	Dir string
	// Options are passed to every registry request (credentials,
	// transport); the context is added per pull.
	Options []remote.Option
	// MaxBytes bounds the cache: after each pull the least recently used
	// images are evicted until it holds at most this much (Prune); 0: no
	// bound.
	MaxBytes int64
	// Now is the clock of last uses (nil: time.Now); Log, when set, gets
	// a line per pull that evicted images.
	Now func() time.Time
	Log *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex
	uses  map[string]int // archives being read, by digest hex
}

// Entry is an image in the cache.
type Entry struct {
	// Dir is its OCI image layout.
	Dir string
	// Digest is the manifest's digest, Config the config's: podman's
	// image ID is Config's hex.
	Digest, Config string

	cache *Cache // whose lock Archive holds while it reads Dir
}

func (c *Cache) lock(digest string) func() {
	l := c.mutex(digest)
	l.Lock()
	return l.Unlock
}

// mutex is digest's lock, made at its first use.
func (c *Cache) mutex(digest string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks == nil {
		c.locks = map[string]*sync.Mutex{}
	}
	l, ok := c.locks[digest]
	if !ok {
		l = &sync.Mutex{}
		c.locks[digest] = l
	}
	return l
}

// Ensure makes the image ref present in the cache, pulling it from its
// registry unless it is there already; pulled says whether it was
// fetched. The registry's blobs are checked against their digests as
// they are read (go-containerregistry's remote verifies them).
func (c *Cache) Ensure(ctx context.Context, ref string) (e Entry, pulled bool, err error) {
	d, err := ParseRef(ref)
	if err != nil {
		return Entry{}, false, err
	}
	h := strings.TrimPrefix(d.DigestStr(), "sha256:")
	dir := filepath.Join(c.Dir, "sha256-"+h)
	defer c.lock(h)()
	if e, err := c.entry(dir, d.DigestStr()); err == nil {
		c.touch(dir)
		return e, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Entry{}, false, err
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return Entry{}, false, fmt.Errorf("image cache: %w", err)
	}
	tmp, err := os.MkdirTemp(c.Dir, "pull-*")
	if err != nil {
		return Entry{}, false, fmt.Errorf("image cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	img, err := remote.Image(d, append(append([]remote.Option{}, c.Options...), remote.WithContext(ctx))...)
	if err != nil {
		return Entry{}, false, fmt.Errorf("pull %s: %w", ref, err)
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return Entry{}, false, fmt.Errorf("pull %s: %w", ref, err)
	}
	if err := p.AppendImage(img); err != nil {
		return Entry{}, false, fmt.Errorf("pull %s: %w", ref, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Entry{}, false, fmt.Errorf("pull %s: %w", ref, err)
	}
	c.touch(dir)
	if e, err = c.entry(dir, d.DigestStr()); err != nil {
		return Entry{}, false, err
	}
	if evicted, held, err := c.Prune(h); c.Log != nil && (len(evicted) > 0 || err != nil) {
		c.Log.Info("image cache over its bound: evicted the least recently used", "pulled", d.DigestStr(),
			"evicted", evicted, "held_bytes", held, "max_bytes", c.MaxBytes, "err", err)
	}
	return e, true, nil
}

// entry reads a cached layout; fs.ErrNotExist when there is none.
func (c *Cache) entry(dir, digest string) (Entry, error) {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return Entry{}, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return Entry{}, fmt.Errorf("image cache %s: %w", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return Entry{}, fmt.Errorf("image cache %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != digest {
		return Entry{}, fmt.Errorf("image cache %s: not the layout of %s (%v)", dir, digest, err)
	}
	img, err := p.Image(im.Manifests[0].Digest)
	if err != nil {
		return Entry{}, fmt.Errorf("image cache %s: %w", dir, err)
	}
	cfg, err := img.ConfigName()
	if err != nil {
		return Entry{}, fmt.Errorf("image cache %s: %w", dir, err)
	}
	return Entry{Dir: dir, Digest: digest, Config: cfg.String(), cache: c}, nil
}

// Archive writes the entry as an OCI archive (a tar of its layout), what
// `podman load` reads from its standard input.
func (e Entry) Archive(w io.Writer) error {
	if e.cache != nil {
		defer e.cache.use(strings.TrimPrefix(e.Digest, "sha256:"))() // not evicted while read
	}
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(e.Dir, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(e.Dir, path)
		if err != nil || rel == "." {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = filepath.ToSlash(rel), 0, 0, "", ""
		if de.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("image archive %s: %w", e.Digest, err)
	}
	return tw.Close()
}
