// Package gateway holds the layout test of the gateway's rooms
// (docs/decisions/0012-gateway-rooms.md): gateway/core, the SSH front
// (sshgate) and the HTTPS front (gateway/httpfront).
package gateway

import (
	"go/build"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gpuaas/gpuaas"

// imports returns the imports of the non-test Go files of the package
// at dir (relative to the module root), for this platform's build.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	pkg, err := build.ImportDir(filepath.Join(root, dir), 0)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return pkg.Imports
}

// reach returns every package of the module the package at dir imports,
// directly or through other packages of the module, with the external
// packages those import, each mapped to the chain that reaches it.
func reach(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	var walk func(dir string, chain []string)
	walk = func(dir string, chain []string) {
		for _, imp := range imports(t, dir) {
			if _, seen := out[imp]; seen {
				continue
			}
			c := append(slices.Clone(chain), imp)
			out[imp] = c
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				walk(rel, c)
			}
		}
	}
	walk(dir, []string{module + "/" + dir})
	return out
}

// TestCoreSpeaksNoSSHServer: the core reaches no SSH server library (the
// fronts own the user-facing protocol), nothing of wish, no cli/ package
// and not the SSH front, directly or through a package of ours. (It does
// use x/crypto/ssh: the gateway link carries SSH's connection layer.)
func TestCoreSpeaksNoSSHServer(t *testing.T) {
	forbidden := func(p string) bool {
		return strings.HasPrefix(p, "github.com/gliderlabs/ssh") ||
			strings.HasPrefix(p, "github.com/charmbracelet/ssh") ||
			strings.HasPrefix(p, "github.com/charmbracelet/wish") ||
			strings.HasPrefix(p, module+"/cli") ||
			p == module+"/sshgate" || strings.HasPrefix(p, module+"/sshgate/")
	}
	for p, chain := range reach(t, "gateway/core") {
		if forbidden(p) {
			t.Errorf("gateway/core reaches %s: %s", p, strings.Join(chain, " → "))
		}
	}
}

// TestHTTPFrontImportsNoSSH: the HTTPS front imports no SSH package of
// any kind, and no cli/ package; it reaches nodes only through the core.
func TestHTTPFrontImportsNoSSH(t *testing.T) {
	for _, p := range imports(t, "gateway/httpfront") {
		last := p[strings.LastIndex(p, "/")+1:]
		if strings.Contains(strings.ToLower(last), "ssh") || strings.Contains(p, "/ssh/") || strings.HasSuffix(p, "/ssh") ||
			strings.HasPrefix(p, "github.com/charmbracelet/wish") || strings.HasPrefix(p, module+"/cli") {
			t.Errorf("gateway/httpfront imports %s", p)
		}
	}
	for p, chain := range reach(t, "gateway/httpfront") {
		if strings.HasPrefix(p, module+"/cli") || strings.HasPrefix(p, "github.com/charmbracelet/wish") {
			t.Errorf("gateway/httpfront reaches %s: %s", p, strings.Join(chain, " → "))
		}
	}
}

// TestSSHFrontUsesTheCore: the SSH front reaches nodes through the core,
// not a dialer of its own: it imports gateway/core, and none of its files
// asks controld for a ticket or opens a link client (the core's
// Authorize does both).
func TestSSHFrontUsesTheCore(t *testing.T) {
	if !slices.Contains(imports(t, "sshgate"), module+"/gateway/core") {
		t.Error("sshgate does not import gateway/core")
	}
	_, file, _, _ := runtime.Caller(0)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(file)), "sshgate", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("list sshgate: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range []string{"sshlink.Client(", ".GateAuthorize("} {
			if strings.Contains(string(b), call) {
				t.Errorf("%s calls %s: dialling nodes is the core's", filepath.Base(f), call)
			}
		}
	}
}
