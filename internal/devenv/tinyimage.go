package devenv

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaas/gpuaas/internal/registry"
)

// BusyboxPath is the static busybox (Debian's busybox-static,
// scripts/deps) that gives the stock image its shell.
var BusyboxPath = "/bin/busybox"

// tinyApplets are the commands the stock image has, each a symbolic link
// to bin/busybox: a shell for `ssh <workload>@gateway` and the tools a
// renter checks a container with (docs/apps.md, "The dev stock image").
var tinyApplets = []string{"sh", "cat", "id", "ls", "ps", "sleep", "env", "echo", "uname", "httpd", "wget"}

// stockImage is the dev stock image: stockImageFiles, and with busybox at
// busybox its shell and applets (bin/busybox plus links), in one layer
// whose bytes are the same on every start (fixed times and modes), so
// its digest is too. Without busybox (not installed) it is the files
// alone, as before, and has no shell.
func stockImage(busybox string) (v1.Image, error) {
	bin, err := os.ReadFile(busybox)
	if errors.Is(err, fs.ErrNotExist) {
		return registry.Tiny(stockImageFiles)
	}
	if err != nil {
		return nil, fmt.Errorf("stock image: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) error {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	if err := add(&tar.Header{Name: "bin/", Mode: 0o755, Typeflag: tar.TypeDir}, nil); err != nil {
		return nil, fmt.Errorf("stock image: %w", err)
	}
	if err := add(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}, bin); err != nil {
		return nil, fmt.Errorf("stock image: %w", err)
	}
	for _, a := range tinyApplets {
		if err := add(&tar.Header{Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, Typeflag: tar.TypeSymlink}, nil); err != nil {
			return nil, fmt.Errorf("stock image: %w", err)
		}
	}
	paths := make([]string, 0, len(stockImageFiles))
	for p := range stockImageFiles {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		body := []byte(stockImageFiles[p])
		if err := add(&tar.Header{Name: p, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}, body); err != nil {
			return nil, fmt.Errorf("stock image: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("stock image: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return nil, fmt.Errorf("stock image: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("stock image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("stock image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin"}
	return mutate.ConfigFile(img, cf)
}
