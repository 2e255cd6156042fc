package controld_test

import (
	"testing"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/registry"
)

// testRegistry starts a registry on loopback for the test's controld.
func testRegistry(t *testing.T) controld.RegistryConfig {
	t.Helper()
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return controld.RegistryConfig{Addr: srv.Addr()}
}

// pushTestImage pushes a one-layer image (content makes it unique) to the
// registry controld names, and returns its REPOSITORY@sha256:… reference.
func pushTestImage(t *testing.T, c *api.Client, content string) string {
	t.Helper()
	r, err := c.ImageRegistry(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Settings{Addr: r.Registry})
	if err != nil {
		t.Fatal(err)
	}
	img, err := registry.Tiny(map[string]string{"hello": content})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reg.Push(t.Context(), "gpuaas/test", img)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// imageUser is a client of a new user (a session no other step ends).
func imageUser(t *testing.T, env *controldtest.Env, email string) *api.Client {
	t.Helper()
	_, token := env.AddUser(t, email, api.RoleUser)
	return env.Client(token)
}
