package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaas/gpuaas/internal/registry"
)

// serve starts a registry on loopback and a client configured with it.
func serve(t *testing.T) (*registry.Server, *registry.Client) {
	t.Helper()
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := registry.New(registry.Settings{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func tiny(t *testing.T, content string) v1.Image {
	t.Helper()
	img, err := registry.Tiny(map[string]string{"bin/hello": content, "etc/os-release": "ID=tiny\n"})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestPushResolveVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := serve(t)
	img := tiny(t, "#!/bin/sh\necho hello\n")
	ref, err := c.Push(ctx, "gpuaas/tiny", img)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	if want := srv.Addr() + "/gpuaas/tiny@" + d.String(); ref != want {
		t.Fatalf("pushed: got %s; want %s", ref, want)
	}
	// A tag resolves once to its digest; a digest is taken as it is.
	tag, _ := name.NewTag(srv.Addr() + "/gpuaas/tiny:v1")
	if err := remote.Tag(tag, img); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{srv.Addr() + "/gpuaas/tiny:v1", "gpuaas/tiny:v1", ref} {
		repo, digest, err := c.Resolve(ctx, in)
		if err != nil || repo != srv.Addr()+"/gpuaas/tiny" || digest != d.String() {
			t.Errorf("resolve %s: got %s %s, %v", in, repo, digest, err)
		}
	}
	if _, _, err := c.Resolve(ctx, "gpuaas/tiny:nope"); err == nil {
		t.Error("resolve of a missing tag: no error")
	}
	chk, err := c.Verify(ctx, ref)
	if err != nil || !chk.OK || chk.Platform != "linux/amd64" || chk.Layers != 1 || chk.SizeBytes <= 0 {
		t.Fatalf("verify: %+v, %v", chk, err)
	}
	// The config's digest is recorded: an app's price follows it
	// (docs/decisions/0059-app-prices.md).
	if cfg, _ := img.ConfigName(); chk.ConfigDigest != cfg.String() {
		t.Errorf("verify's config digest %q; want %s", chk.ConfigDigest, cfg)
	}
}

// tamper rewrites the image's first layer in the registry's storage: the
// same length with one byte changed, or one byte longer.
func tamper(t *testing.T, srv *registry.Server, img v1.Image, longer bool) v1.Hash {
	t.Helper()
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	path, err := srv.BlobPath(ld.String())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if longer {
		data = append(data, 0)
	} else {
		data[len(data)/2] ^= 0xff
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return ld
}

func TestVerifyFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name   string
		setup  func(t *testing.T, srv *registry.Server, c *registry.Client) string
		reason string
	}{
		{"a layer whose digest does not match", func(t *testing.T, srv *registry.Server, c *registry.Client) string {
			img := tiny(t, "digest")
			ref, _ := c.Push(ctx, "gpuaas/a", img)
			ld := tamper(t, srv, img, false)
			return ref + " " + "layer 1 (" + ld.String() + "): digest mismatch"
		}, ""},
		{"a layer of another size", func(t *testing.T, srv *registry.Server, c *registry.Client) string {
			img := tiny(t, "size")
			ref, _ := c.Push(ctx, "gpuaas/b", img)
			tamper(t, srv, img, true)
			return ref + " size mismatch"
		}, ""},
		{"another platform", func(t *testing.T, srv *registry.Server, c *registry.Client) string {
			img := tiny(t, "arm")
			cf, _ := img.ConfigFile()
			cf = cf.DeepCopy()
			cf.Architecture = "arm64"
			img, _ = mutate.ConfigFile(img, cf)
			ref, _ := c.Push(ctx, "gpuaas/c", img)
			return ref + " platform linux/arm64, not linux/amd64"
		}, ""},
		{"a manifest the registry does not have", func(t *testing.T, srv *registry.Server, c *registry.Client) string {
			return srv.Addr() + "/gpuaas/d@sha256:" + strings.Repeat("0", 64) + " manifest:"
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c := serve(t)
			ref, want, _ := strings.Cut(tt.setup(t, srv, c), " ")
			chk, err := c.Verify(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if chk.OK || !strings.Contains(chk.Reason, want) {
				t.Fatalf("got %+v; want a failure with %q", chk, want)
			}
		})
	}
}

func TestVerifyUnreachableIsAnError(t *testing.T) {
	t.Parallel()
	srv, c := serve(t)
	ref, err := c.Push(context.Background(), "gpuaas/tiny", tiny(t, "x"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if chk, err := c.Verify(context.Background(), ref); err == nil {
		t.Fatalf("verify with the registry down: got %+v, no error", chk)
	}
}

func TestReadArchiveDocker(t *testing.T) {
	t.Parallel()
	img := tiny(t, "docker")
	path := filepath.Join(t.TempDir(), "tiny.tar")
	tag, _ := name.NewTag("tiny:latest")
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
	got, done, err := registry.ReadArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Fatalf("digest: got %s; want %s", d, want)
	}
}

// TestTinyIsReproducible: the same files make the same digest, which
// `gpuaas dev` relies on across restarts of its registry.
func TestTinyIsReproducible(t *testing.T) {
	a, b := tiny(t, "same"), tiny(t, "same")
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("digests: %s and %s", da, db)
	}
}
