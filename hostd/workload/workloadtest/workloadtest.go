// Package workloadtest gives tests of workloads a runnable image in an
// in-process registry (internal/registry): a static program (wlapp) in
// one layer, pushed by digest.
package workloadtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/gpuaas/gpuaas/internal/registry"
)

var (
	buildOnce sync.Once
	binary    []byte
	buildErr  error
)

// App is the path of wlapp in the image.
const App = "/bin/wlapp"

// build compiles wlapp once per test binary, statically.
func build(t testing.TB) []byte {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "wlapp-")
		if err != nil {
			buildErr = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "wlapp")
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./wlapp")
		cmd.Dir = filepath.Dir(file)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if msg, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err: err, out: string(msg)}
			return
		}
		binary, buildErr = os.ReadFile(out)
	})
	if buildErr != nil {
		t.Fatalf("build wlapp: %v", buildErr)
	}
	return binary
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// Registry starts an in-process registry for the test.
func Registry(t testing.TB) *registry.Server {
	t.Helper()
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// Push pushes the wlapp image (plus extra files) to repo in srv and
// returns its REGISTRY/REPOSITORY@sha256:… reference.
func Push(t testing.TB, srv *registry.Server, repo string, extra map[string]string) string {
	t.Helper()
	return PushAs(t, srv, repo, "", extra)
}

// PushAs is Push of an image whose config runs it as user (USER in a
// Dockerfile; "" is root).
func PushAs(t testing.TB, srv *registry.Server, repo, user string, extra map[string]string) string {
	t.Helper()
	img := Image(t, user, extra)
	c, err := registry.New(registry.Settings{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := c.Push(context.Background(), repo, img)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// Image is the wlapp image (plus extra files), run as user ("" is root).
func Image(t testing.TB, user string, extra map[string]string) v1.Image {
	t.Helper()
	files := map[string]string{"bin/wlapp": string(build(t)),
		"etc/os-release": "ID=wlapp\n"}
	for k, v := range extra {
		files[k] = v
	}
	img, err := registry.Tiny(files)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.Config.User = user
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
	}
	return img
}
