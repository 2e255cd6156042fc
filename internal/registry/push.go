package registry

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Push pushes img to repository repo (in the configured registry when it
// names none) by digest, without a tag, and returns REPOSITORY@sha256:….
func (c *Client) Push(ctx context.Context, repo string, img v1.Image) (string, error) {
	r, err := name.NewRepository(repo, c.nameOptions()...)
	if err != nil {
		return "", fmt.Errorf("push: repository %q: %w", repo, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	ref := r.Digest(d.String())
	if err := remote.Write(ref, img, c.options(ctx)...); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return ref.String(), nil
}

// ReadArchive opens an image archive: `docker save`'s (manifest.json) or
// an OCI image layout in a tar (`podman save --format oci-archive`,
// oci-layout); of a layout with several images, the linux/amd64 one.
// done removes what reading needed, once the image was pushed.
func ReadArchive(path string) (img v1.Image, done func(), err error) {
	oci, err := isOCIArchive(path)
	if err != nil {
		return nil, nil, err
	}
	if !oci {
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("read docker archive %s: %w", path, err)
		}
		return img, func() {}, nil
	}
	// A layout is read from a directory, lazily: it stays until done.
	dir, err := os.MkdirTemp("", "gpuaas-oci-*")
	if err != nil {
		return nil, nil, fmt.Errorf("read OCI archive: %w", err)
	}
	done = func() { os.RemoveAll(dir) }
	img, err = readLayout(path, dir)
	if err != nil {
		done()
		return nil, nil, err
	}
	return img, done, nil
}

func readLayout(path, dir string) (v1.Image, error) {
	if err := untar(path, dir); err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read OCI archive %s: %w", path, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read OCI archive %s: %w", path, err)
	}
	for _, m := range im.Manifests {
		if !m.MediaType.IsImage() {
			continue
		}
		if len(im.Manifests) == 1 || (m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == "amd64") {
			return idx.Image(m.Digest)
		}
	}
	return nil, fmt.Errorf("read OCI archive %s: no single linux/amd64 image in it", path)
}

func isOCIArchive(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("read archive: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read archive %s: %w", path, err)
		}
		if filepath.Clean(h.Name) == "oci-layout" {
			return true, nil
		}
	}
}

// untar extracts the regular files and directories of an archive under
// dir, refusing names that would leave it.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive %s: %w", path, err)
		}
		clean := filepath.Clean(h.Name)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("read archive %s: entry %q leaves the archive", path, h.Name)
		}
		target := filepath.Join(dir, clean)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("read archive: %w", err)
			}
		case tar.TypeReg:
			if err := writeFile(target, tr); err != nil {
				return fmt.Errorf("read archive: %w", err)
			}
		}
	}
}

func writeFile(target string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	out, err := os.Create(target)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
