package devenv

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gpuaas/gpuaas/internal/registry"
)

// StockImage is the image `gpuaas dev` seeds, verified and promoted: a
// one-layer image made in Go (no registry on the internet is reachable),
// with busybox's shell and applets when busybox-static is installed
// (tinyimage.go).
const StockImage = "tiny"

// stockImageFiles are its files; the same bytes on every start give the
// same digest, so the catalog's entry stays valid across restarts of the
// registry, which forgets its manifests.
var stockImageFiles = map[string]string{
	"etc/os-release": "ID=gpuaas-tiny\nNAME=\"gpuaas tiny\"\nPRETTY_NAME=\"gpuaas tiny (dev stock image)\"\n",
	"hello":          "#!/bin/sh\necho hello from the gpuaas tiny image\n",
}

// startRegistry runs an OCI registry on loopback (go-containerregistry's
// in-process one, blobs under the data directory) for controld.
func (e *Env) startRegistry() error {
	srv, err := registry.Serve("127.0.0.1:0", filepath.Join(e.cfg.DataDir, "registry"))
	if err != nil {
		return err
	}
	e.onClose("registry", srv.Close)
	e.RegistryAddr = srv.Addr()
	return nil
}

// seedImages pushes the stock image and makes it a verified, promoted
// platform image.
func (e *Env) seedImages(ctx context.Context) error {
	img, err := stockImage(BusyboxPath)
	if err != nil {
		return err
	}
	reg, err := registry.New(registry.Settings{Addr: e.RegistryAddr})
	if err != nil {
		return err
	}
	ref, err := reg.Push(ctx, "gpuaas/"+StockImage, img)
	if err != nil {
		return fmt.Errorf("seed images: %w", err)
	}
	// A data directory seeded before tiny had a shell names the files-only
	// digest: push it too, so that entry (which SeedImage keeps) still
	// pulls after a restart (the registry forgets its manifests).
	legacy, err := registry.Tiny(stockImageFiles)
	if err != nil {
		return err
	}
	if _, err := reg.Push(ctx, "gpuaas/"+StockImage, legacy); err != nil {
		return fmt.Errorf("seed images: %w", err)
	}
	if _, err = e.Controld.SeedImage(ctx, StockImage, ref, e.Admin.ID); err != nil {
		return err
	}
	_, err = e.Controld.SeedApp(ctx, stockAppManifest, e.Admin.ID)
	return err
}

// stockAppManifest is the app `gpuaas dev` publishes and promotes, so that
// `gpuaas app list` offers it: the stock image as it is (its own
// command), every GPU of the allocation (docs/apps.md, "Publishing apps").
const stockAppManifest = "name: " + StockImage + "\nimage: " + StockImage + "\n"
