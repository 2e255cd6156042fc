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
	"os"
	"path/filepath"
	"strings"
	"sync"

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

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Entry is an image in the cache.
type Entry struct {
	// Dir is its OCI image layout.
	Dir string
	// Digest is the manifest's digest, Config the config's: podman's
	// image ID is Config's hex.
	Digest, Config string
}

func (c *Cache) lock(digest string) func() {
	c.mu.Lock()
	if c.locks == nil {
		c.locks = map[string]*sync.Mutex{}
	}
	l, ok := c.locks[digest]
	if !ok {
		l = &sync.Mutex{}
		c.locks[digest] = l
	}
	c.mu.Unlock()
	l.Lock()
	return l.Unlock
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
	e, err = c.entry(dir, d.DigestStr())
	return e, err == nil, err
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
	return Entry{Dir: dir, Digest: digest, Config: cfg.String()}, nil
}

// Archive writes the entry as an OCI archive (a tar of its layout), what
// `podman load` reads from its standard input.
func (e Entry) Archive(w io.Writer) error {
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
