package guestimage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFakeImage writes small stand-ins for the three files and their
// manifest; Verify hashes whatever is there, so the check is the real one.
func writeFakeImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{DiskFile: "QFI\xfb disk", KernelFile: "kernel", InitrdFile: "initrd"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := Manifest{Key: "k", Disk: File{Name: DiskFile}, Kernel: File{Name: KernelFile}, Initrd: File{Name: InitrdFile}}
	if err := WriteManifest(dir, &m); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestVerifyAcceptsIntactImage(t *testing.T) {
	dir := writeFakeImage(t)
	img, err := Verify(dir)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if want := filepath.Join(dir, DiskFile); img.Disk != want {
		t.Errorf("Disk = %s; want %s", img.Disk, want)
	}
}

// TestVerifyRefusesCorruptImage is the bad-input case of guest images: one
// flipped byte in any file is refused, and the error names the file and
// both digests.
func TestVerifyRefusesCorruptImage(t *testing.T) {
	for _, name := range []string{DiskFile, KernelFile, InitrdFile} {
		t.Run(name, func(t *testing.T) {
			dir := writeFakeImage(t)
			p := filepath.Join(dir, name)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-1] ^= 0x01
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Verify(dir)
			if !errors.Is(err, ErrDigestMismatch) {
				t.Fatalf("Verify error = %v; want ErrDigestMismatch", err)
			}
			want := map[string]string{DiskFile: m.Disk.SHA256, KernelFile: m.Kernel.SHA256, InitrdFile: m.Initrd.SHA256}[name]
			for _, s := range []string{p, want, "corrupt"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
}

func TestVerifyRefusesMissingOrBadManifest(t *testing.T) {
	tests := []struct {
		name     string
		manifest string // "" leaves none
	}{
		{"none", ""},
		{"not json", "{"},
		{"path in name", `{"disk":{"name":"../x","sha256":"a"},"kernel":{"name":"k","sha256":"a"},"initrd":{"name":"i","sha256":"a"}}`},
		{"no digest", `{"disk":{"name":"d"},"kernel":{"name":"k","sha256":"a"},"initrd":{"name":"i","sha256":"a"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.manifest != "" {
				if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(tc.manifest), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := Verify(dir); !errors.Is(err, ErrNoManifest) {
				t.Fatalf("Verify error = %v; want ErrNoManifest", err)
			}
		})
	}
}

// TestBuildRefusesNonRootWithoutCache: a build that would have to run
// debootstrap says it needs root instead of failing halfway.
func TestBuildRefusesNonRootWithoutCache(t *testing.T) {
	cache := t.TempDir()
	_, err := Build(t.Context(), Config{CacheDir: cache, Geteuid: func() int { return 1000 }})
	if !errors.Is(err, ErrNotRoot) {
		t.Fatalf("Build error = %v; want ErrNotRoot", err)
	}
}
