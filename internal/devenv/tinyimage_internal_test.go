package devenv

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuaas/gpuaas/internal/registry"
)

// TestStockImageHasAShell: with busybox-static installed, the dev stock
// image holds bin/busybox (the installed bytes) and bin/sh, bin/cat, ...
// linked to it, beside its files, with PATH=/bin; two builds have the same
// digest (the catalog's entry stays valid across dev restarts); without
// busybox it is the files alone, as before.
func TestStockImageHasAShell(t *testing.T) {
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Skipf("no busybox-static: %v", err)
	}
	img, err := stockImage(BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	again, err := stockImage(BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds: %s and %s; want one digest", d1, d2)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		if h.Name == "bin/busybox" {
			body, _ := io.ReadAll(tr)
			if !bytes.Equal(body, bin) {
				t.Errorf("bin/busybox: %d bytes, not the installed %d", len(body), len(bin))
			}
		}
	}
	for _, applet := range []string{"sh", "cat", "id", "sleep"} {
		if h := got["bin/"+applet]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("bin/%s: %+v; want a link to busybox", applet, h)
		}
	}
	for _, f := range []string{"bin/busybox", "etc/os-release", "hello"} {
		if got[f] == nil {
			t.Errorf("no %s in the layer", f)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil || cf.OS != "linux" || cf.Architecture != "amd64" || len(cf.Config.Env) != 1 || cf.Config.Env[0] != "PATH=/bin" {
		t.Errorf("config %+v, %v", cf, err)
	}

	plain, err := stockImage(filepath.Join(t.TempDir(), "no-busybox"))
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := registry.Tiny(stockImageFiles)
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := plain.Digest()
	td, _ := tiny.Digest()
	if pd != td {
		t.Errorf("without busybox: %s; want the files alone, %s", pd, td)
	}
}
