package registry_test

import (
	"archive/tar"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/gpuaas/gpuaas/internal/registry"
)

// tarDir writes dir's files into a tar at path, named relative to dir,
// plus extra entries (name → content) as they are.
func tarDir(t *testing.T, dir, path string, extra map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range extra {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReadArchiveOCI(t *testing.T) {
	t.Parallel()
	img := tiny(t, "oci")
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "oci.tar")
	tarDir(t, dir, path, nil)
	got, done, err := registry.ReadArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Fatalf("digest: got %s; want %s", d, want)
	}
	// The layout is readable until done, then gone.
	if _, err := got.RawConfigFile(); err != nil {
		t.Fatal(err)
	}
}

func TestReadArchiveRefusesEntriesOutside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(tiny(t, "evil")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "evil.tar")
	tarDir(t, dir, path, map[string]string{"../escaped": "x"})
	if _, _, err := registry.ReadArchive(path); err == nil || !strings.Contains(err.Error(), "leaves the archive") {
		t.Fatalf("got %v; want a refusal of ../escaped", err)
	}
}

func TestCredentialsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		name, content, want string
	}{
		{"good", `{"username": "ops", "password": "s3cret"}`, ""},
		{"unknown key", `{"user": "ops"}`, "unknown field"},
		{"no username", `{"password": "x"}`, "no username"},
		{"not JSON", `ops:s3cret`, "credentials"},
	} {
		path := filepath.Join(dir, tt.name)
		if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := registry.New(registry.Settings{Addr: "127.0.0.1:5000", CredentialsFile: path})
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: got %v; want %q", tt.name, err, tt.want)
		}
	}
	if _, err := registry.New(registry.Settings{CredentialsFile: filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing credentials file: no error")
	}
}
