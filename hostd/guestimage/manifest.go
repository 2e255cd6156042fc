package guestimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// Manifest describes a built image; it is written as ManifestFile next to
// the image's files.
type Manifest struct {
	// Key is the SHA-256 of the build's inputs; a build with the same key
	// reuses the cached image.
	Key      string    `json:"key"`
	Suite    string    `json:"suite"`
	Mirror   string    `json:"mirror"`
	Packages []string  `json:"packages"`
	Cmdline  string    `json:"cmdline"`
	Built    time.Time `json:"built"`
	// BuildSeconds is how long the cold build took.
	BuildSeconds float64 `json:"build_seconds"`
	// Driver names the GPU driver built into the image (the NVIDIA
	// variant: package version, module path, kernel); empty without one.
	Driver string `json:"driver,omitempty"`
	Disk   File   `json:"disk"`
	Kernel File   `json:"kernel"`
	Initrd File   `json:"initrd"`
}

// File is one file of an image, by name relative to the image directory.
type File struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Image is a verified image on disk: absolute paths and the manifest.
type Image struct {
	Dir      string
	Disk     string
	Kernel   string
	Initrd   string
	Manifest Manifest
}

// files lists the manifest's files in a fixed order.
func (m *Manifest) files() []*File { return []*File{&m.Disk, &m.Kernel, &m.Initrd} }

// ReadManifest reads dir's manifest without checking the files.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, fmt.Errorf("%w in %s: %w", ErrNoManifest, dir, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%w in %s: %s is not valid JSON: %w", ErrNoManifest, dir, ManifestFile, err)
	}
	for _, f := range m.files() {
		if f.Name == "" || f.SHA256 == "" || filepath.Base(f.Name) != f.Name {
			return m, fmt.Errorf("%w in %s: a file entry is empty or not a plain name (%q)", ErrNoManifest, dir, f.Name)
		}
	}
	return m, nil
}

// Verify reads dir's manifest and checks every file's size and SHA-256
// against it. A mismatch is ErrDigestMismatch naming the file and both
// digests.
func Verify(dir string) (Image, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return Image{}, err
	}
	for _, f := range m.files() {
		p := filepath.Join(dir, f.Name)
		sum, size, err := hashFile(p)
		if err != nil {
			return Image{}, fmt.Errorf("verify image %s: %w", dir, err)
		}
		if sum != f.SHA256 {
			return Image{}, fmt.Errorf("%w: %s has sha256 %s (%d bytes) but the manifest records %s (%d bytes): the file is corrupt or was changed; rebuild it with gpuaas ops image build --force",
				ErrDigestMismatch, p, sum, size, f.SHA256, f.Size)
		}
	}
	return Image{
		Dir:      dir,
		Disk:     filepath.Join(dir, m.Disk.Name),
		Kernel:   filepath.Join(dir, m.Kernel.Name),
		Initrd:   filepath.Join(dir, m.Initrd.Name),
		Manifest: m,
	}, nil
}

// hashFile returns p's hex SHA-256 and size.
func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// WriteManifest fills in the digests and sizes of m's files in dir and
// writes the manifest there.
func WriteManifest(dir string, m *Manifest) error {
	for _, f := range m.files() {
		sum, size, err := hashFile(filepath.Join(dir, f.Name))
		if err != nil {
			return fmt.Errorf("hash %s: %w", f.Name, err)
		}
		f.SHA256, f.Size = sum, size
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFile(filepath.Join(dir, ManifestFile), append(data, '\n'), 0o644, fsutil.Synced)
}
