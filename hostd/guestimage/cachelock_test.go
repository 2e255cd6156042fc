package guestimage

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCachedImageIgnoresBuildLock: while another build holds the images
// directory's lock (a cold build, which can take many minutes for the
// NVIDIA variant), a build whose image is cached and verifies returns it
// at once instead of waiting for the lock.
func TestCachedImageIgnoresBuildLock(t *testing.T) {
	cfg := Config{CacheDir: t.TempDir()}
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	dir := cfg.ImageDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{DiskFile, KernelFile, InitrdFile} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("the "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := Manifest{Key: cfg.Key(), Disk: File{Name: DiskFile}, Kernel: File{Name: KernelFile}, Initrd: File{Name: InitrdFile}}
	if err := WriteManifest(dir, &m); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockDir(filepath.Dir(dir)) // another build's
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	done := make(chan error, 1)
	var res Result
	go func() {
		var err error
		res, err = Build(context.Background(), cfg)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil || !res.Cached || res.Dir != dir {
			t.Fatalf("Build = %+v, %v; want the cached image", res, err)
		}
	case <-time.After(time.Minute):
		unlock() // let the blocked Build end with the test
		t.Fatal("Build of a cached image waited for another build's lock")
	}
}
