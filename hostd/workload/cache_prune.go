package workload

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// PruneGrace is how long after its last use an image is never evicted:
// a start that has just had its entry from Ensure streams it into the
// renter's podman next (Entry.Archive also holds the image's lock while
// it reads).
const PruneGrace = 2 * time.Minute

// cached is one image of the cache as Prune sees it.
type cached struct {
	hex  string
	dir  string
	used time.Time
	size int64
}

// touch marks dir as used now: an image's last use is its directory's
// modification time (docs/apps.md, "The node's image cache").
func (c *Cache) touch(dir string) {
	now := c.now()
	_ = os.Chtimes(dir, now, now)
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Prune evicts the least recently used images until the cache holds at
// most MaxBytes (0: no bound); it keeps keep (the image just pulled, even
// when alone over the bound), images in use (their lock is held) and
// images used within PruneGrace. An evicted image is pulled again by the
// next start that needs it; running containers are unaffected (each
// renter's podman holds its own copy). It returns the evicted digests
// and the bytes the cache holds afterwards.
func (c *Cache) Prune(keep string) (evicted []string, held int64, err error) {
	keep = strings.TrimPrefix(keep, "sha256:")
	all, err := c.list()
	for _, e := range all {
		held += e.size
	}
	if err != nil || c.MaxBytes <= 0 {
		return nil, held, err
	}
	slices.SortFunc(all, func(a, b cached) int { return a.used.Compare(b.used) })
	now := c.now()
	for _, e := range all {
		if held <= c.MaxBytes {
			break
		}
		if e.hex == keep || now.Sub(e.used) < PruneGrace {
			continue
		}
		unlock, ok := c.tryLock(e.hex)
		if !ok {
			continue // in use: pulled, checked or archived right now
		}
		if c.inUse(e.hex) {
			unlock()
			continue
		}
		err := c.evict(e.dir)
		unlock()
		if err != nil {
			return evicted, held, err
		}
		held -= e.size
		evicted = append(evicted, "sha256:"+e.hex)
	}
	return evicted, held, nil
}

// evict takes dir out of the cache in one rename, then deletes it.
func (c *Cache) evict(dir string) error {
	gone, err := os.MkdirTemp(c.Dir, "evict-*")
	if err != nil {
		return fmt.Errorf("image cache: evict %s: %w", dir, err)
	}
	target := filepath.Join(gone, "image")
	if err := os.Rename(dir, target); err != nil {
		_ = os.Remove(gone)
		return fmt.Errorf("image cache: evict %s: %w", dir, err)
	}
	return os.RemoveAll(gone)
}

// list reads the cache's images with their last use and size; pulls and
// evictions under way (pull-*, evict-*) are not images.
func (c *Cache) list() ([]cached, error) {
	des, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	var out []cached
	for _, de := range des {
		hex, ok := strings.CutPrefix(de.Name(), "sha256-")
		if !ok || !de.IsDir() {
			if strings.HasPrefix(de.Name(), "evict-") {
				_ = os.RemoveAll(filepath.Join(c.Dir, de.Name())) // left by a crash mid-eviction
			}
			continue
		}
		dir := filepath.Join(c.Dir, de.Name())
		fi, err := os.Stat(dir)
		if err != nil {
			continue // evicted meanwhile
		}
		size, err := dirSize(dir)
		if err != nil {
			continue
		}
		out = append(out, cached{hex: hex, dir: dir, used: fi.ModTime(), size: size})
	}
	return out, nil
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.Type().IsRegular() {
			fi, err := de.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// tryLock takes hex's lock unless someone holds it.
func (c *Cache) tryLock(hex string) (func(), bool) {
	l := c.mutex(hex)
	if !l.TryLock() {
		return nil, false
	}
	return l.Unlock, true
}

// use marks hex as being read until the returned func is called; Prune
// leaves such an image alone. Many readers may use one image at once; the
// mark is set under the image's lock, so Prune, which checks it under
// that lock, never evicts an image between its check and a read.
func (c *Cache) use(hex string) func() {
	unlock := c.lock(hex)
	defer unlock()
	c.mu.Lock()
	if c.uses == nil {
		c.uses = map[string]int{}
	}
	c.uses[hex]++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.uses[hex]--; c.uses[hex] <= 0 {
			delete(c.uses, hex)
		}
		c.mu.Unlock()
	}
}

func (c *Cache) inUse(hex string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uses[hex] > 0
}
