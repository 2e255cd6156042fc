package workload

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/registry"
)

// pruneWorld is a real registry on loopback with images of about the same
// size, and a cache whose clock the test moves.
type pruneWorld struct {
	t     *testing.T
	cache *Cache
	now   time.Time
	refs  map[string]string // name → REGISTRY/REPO@sha256:…
}

func newPruneWorld(t *testing.T, names ...string) *pruneWorld {
	t.Helper()
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := registry.New(registry.Settings{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	w := &pruneWorld{t: t, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), refs: map[string]string{}}
	w.cache = &Cache{Dir: filepath.Join(t.TempDir(), "workload-images"), Now: func() time.Time { return w.now }}
	for _, n := range names {
		img, err := registry.Tiny(map[string]string{"data": strings.Repeat(n, 64<<10)})
		if err != nil {
			t.Fatal(err)
		}
		if w.refs[n], err = c.Push(t.Context(), "prune/"+n, img); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// ensure pulls (or finds) image n at the world's time plus at.
func (w *pruneWorld) ensure(n string, at time.Duration) (Entry, bool) {
	w.t.Helper()
	w.now = w.now.Add(at)
	e, pulled, err := w.cache.Ensure(context.Background(), w.refs[n])
	if err != nil {
		w.t.Fatalf("ensure %s: %v", n, err)
	}
	return e, pulled
}

func (w *pruneWorld) cached(n string) bool {
	h := w.refs[n][strings.Index(w.refs[n], "@sha256:")+len("@sha256:"):]
	_, err := os.Stat(filepath.Join(w.cache.Dir, "sha256-"+h, "index.json"))
	return err == nil
}

func (w *pruneWorld) size(n string) int64 {
	w.t.Helper()
	h := w.refs[n][strings.Index(w.refs[n], "@sha256:")+len("@sha256:"):]
	s, err := dirSize(filepath.Join(w.cache.Dir, "sha256-"+h))
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// TestCacheEvictsLeastRecentlyUsed: with room for about two images, the
// pull of a third evicts the image used longest ago — not the oldest
// pulled, which was used again since — and a later start of the evicted
// image pulls it again. Without the bound all three stay.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	w := newPruneWorld(t, "a", "b", "c")
	w.ensure("a", 0)
	w.ensure("b", 10*time.Minute)
	w.cache.MaxBytes = w.size("a") + w.size("b") + w.size("b")/2
	if _, pulled := w.ensure("a", 10*time.Minute); pulled {
		t.Fatal("a cached image was pulled again")
	}
	w.ensure("c", 10*time.Minute)
	for n, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if got := w.cached(n); got != want {
			t.Errorf("after pulling c: %s cached = %v; want %v (a used 10 min ago, b 20 min ago)", n, got, want)
		}
	}
	if _, pulled := w.ensure("b", time.Minute); !pulled {
		t.Error("b was evicted, yet its next start did not pull it")
	}
	if _, held, err := w.cache.Prune(""); err != nil || held > w.cache.MaxBytes {
		t.Errorf("cache holds %d bytes (%v); want at most %d", held, err, w.cache.MaxBytes)
	}
}

// TestCacheKeepsImagesInUse: an image being read into a renter's podman
// (Archive under way) or used within PruneGrace is not evicted, even over
// the bound; the one just pulled is kept even when alone over it.
func TestCacheKeepsImagesInUse(t *testing.T) {
	w := newPruneWorld(t, "a", "b", "c")
	ea, _ := w.ensure("a", 0)
	w.ensure("b", 10*time.Minute)
	w.cache.MaxBytes = 1 // nothing fits

	// a is being archived while c is pulled: a stays; b (unused for 20
	// minutes, not being read) goes.
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- ea.Archive(pw) }()
	buf := make([]byte, 1)
	if _, err := io.ReadFull(pr, buf); err != nil { // the archive has started
		t.Fatal(err)
	}
	w.ensure("c", 10*time.Minute)
	if !w.cached("a") || w.cached("b") || !w.cached("c") {
		t.Errorf("while a is read: a=%v b=%v c=%v; want a kept (in use), b evicted, c kept (just pulled)",
			w.cached("a"), w.cached("b"), w.cached("c"))
	}
	_ = pr.Close()
	<-done

	// Within the grace after its last use an image stays; after it, the
	// next pull evicts it.
	w.ensure("b", PruneGrace/2) // pulls b: c (used a minute ago) is within its grace
	if !w.cached("c") {
		t.Error("c was evicted within PruneGrace of its last use")
	}
	w.ensure("a", 2*PruneGrace) // a hit: prunes nothing (no pull)
	w.ensure("c", 0)            // c hit
	w.now = w.now.Add(2 * PruneGrace)
	w.ensure("b", 0) // hit: nothing pulled, nothing pruned
	if _, held, err := w.cache.Prune(w.refs["b"][strings.Index(w.refs["b"], "@")+1:]); err != nil {
		t.Fatal(err)
	} else if !w.cached("b") || w.cached("a") || w.cached("c") || held != w.size("b") {
		t.Errorf("after the grace: a=%v b=%v c=%v held %d; want only b (kept) left", w.cached("a"), w.cached("b"), w.cached("c"), held)
	}
}
