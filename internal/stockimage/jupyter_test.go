package stockimage

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"slices"
	"testing"
	"time"
)

// TestJupyterImage builds the jupyter image from Debian's packages (or
// takes it from the machine's cache) and checks what it is: one layer
// with Debian's jupyter-notebook and no device nodes, the notebook as its
// command, linux/amd64; and that a second call takes the cached layer and
// gives the same digest. The first build on a machine takes minutes
// (docs/apps.md, "The jupyter app").
func TestJupyterImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image from Debian packages")
	}
	if os.Geteuid() != 0 {
		t.Skip("building needs root")
	}
	start := time.Now()
	img, cached, err := Jupyter(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("jupyter image: cached %v, %s", cached, time.Since(start).Round(time.Second))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !slices.Equal(cf.Config.Cmd, jupyterCmd) {
		t.Errorf("config: %s/%s cmd %q", cf.OS, cf.Architecture, cf.Config.Cmd)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want 1", len(layers), err)
	}
	size, _ := layers[0].Size()
	t.Logf("layer: %d MB", size>>20)
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var notebook bool
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case h.Name == "./usr/bin/jupyter-notebook":
			notebook = true
		case h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock:
			t.Errorf("device node %s in the layer", h.Name)
		}
	}
	if !notebook {
		t.Error("no /usr/bin/jupyter-notebook in the layer")
	}
	d1, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	again, cached, err := Jupyter(t.Context(), Config{})
	if err != nil || !cached {
		t.Fatalf("second call: cached %v, %v; want the cached layer", cached, err)
	}
	if d2, _ := again.Digest(); d2 != d1 {
		t.Errorf("digest %s, then %s; want the same", d1, d2)
	}
}
