package registry

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Tiny builds a linux/amd64 image of one layer holding files (path →
// content), made here without any tool: the stock image `gpuaas dev`
// seeds, and what tests import.
func Tiny(files map[string]string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o755, Size: int64(len(files[p])), Typeflag: tar.TypeReg}); err != nil {
			return nil, fmt.Errorf("tiny image: %w", err)
		}
		if _, err := tw.Write([]byte(files[p])); err != nil {
			return nil, fmt.Errorf("tiny image: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tiny image: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	})
	if err != nil {
		return nil, fmt.Errorf("tiny image: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("tiny image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("tiny image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	return mutate.ConfigFile(img, cf)
}
