package app

import (
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/registry"
)

// TestCatalogImageOfAPinnedReference: a manifest's REPOSITORY@sha256:…
// runs as the catalog image with that reference (a real controld and
// registry); a reference the catalog lacks is refused as invalid_argument
// naming the image.
func TestCatalogImageOfAPinnedReference(t *testing.T) {
	if testing.Short() {
		t.Skip("starts controld")
	}
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	reg, err := registry.New(registry.Settings{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	env := controldtest.Start(t, controldtest.Options{Registry: registry.Settings{Addr: srv.Addr()}})
	c := env.Client(env.AdminToken, api.WithProject(controldtest.ProjectName))
	push := func(repo, content string) string {
		img, err := registry.Tiny(map[string]string{"bin/hello": content})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := reg.Push(t.Context(), repo, img)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	ref := push("apps/web", "web")
	img, err := c.ImagePublish(t.Context(), api.ImagePublishRequest{Name: "web", Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := catalogImage(t.Context(), c, ref); err != nil || got != img.ID {
		t.Errorf("catalog image of %s: %q, %v; want %s", ref, got, err, img.ID)
	}
	other := push("apps/other", "not published")
	_, err = catalogImage(t.Context(), c, other)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeInvalidArgument || ae.Message == "" {
		t.Errorf("an image not in the catalog: %v; want invalid_argument", err)
	}
}
