package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/registry"
)

// imageArchive builds a busybox-like image (a scratch layer with a file)
// and writes it as `docker save` does; it returns the file and the image.
func imageArchive(t *testing.T, dir, content string) (string, v1.Image) {
	t.Helper()
	img, err := registry.Tiny(map[string]string{"bin/sh": content, "etc/os-release": "ID=e2e\n"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, content+".tar")
	tag, _ := name.NewTag("e2e/" + content + ":latest")
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
	return path, img
}

// TestImagesInDev is the image catalog's acceptance through the built
// binary and `gpuaas dev` (docs/images.md): the stock image is listed,
// verified and promoted; an imported image is unverified, a member's
// promote is refused with exit 5, the owner's verify and promote make it
// usable; a layer whose bytes no longer match its digest fails verify with
// the reason; a revoke shows; bad input is refused.
func TestImagesInDev(t *testing.T) {
	dev, _ := loggedInDev(t)
	data := dev.dataDir
	// ada, a member of the dev project (not an owner).
	r := dev.gpuaas(t, "", "admin", "user", "add", "ada@example.com", "--json", "invite", "--jq", ".invite.code")
	code := strings.TrimSpace(r.stdout)
	if r.code != 0 || code == "" {
		t.Fatalf("admin user add: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "project", "add-member", "dev", "--email", "ada@example.com", "--role", "member"); r.code != 0 {
		t.Fatalf("add-member: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "context", "add", "ada", "--server", devServer(t, dev), "--project", "dev"); r.code != 0 {
		t.Fatalf("context add: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "ada's password\n", "--context", "ada", "login", "--invite", code, "--password-stdin"); r.code != 0 {
		t.Fatalf("ada's login: exit %d %s", r.code, r.stderr)
	}

	// The stock image, as a user sees it.
	var imgs []api.Image
	dev.gpuaasJSON(t, &imgs, "--context", "ada", "image", "list", "--json")
	if len(imgs) != 1 || imgs[0].Name != "tiny" || imgs[0].Lifecycle != api.ImagePromoted || imgs[0].Trust != api.TrustVerified ||
		!strings.Contains(imgs[0].Ref, "@sha256:") {
		t.Fatalf("ada's image list: %+v; want the stock image, promoted and verified", imgs)
	}
	if r := dev.gpuaas(t, "", "image", "list"); r.code != 0 || !strings.Contains(r.stdout, "tiny\tplatform\tpromoted\tverified\tsha256:") {
		t.Errorf("image list (piped): exit %d, stdout %q", r.code, r.stdout)
	}

	// Imported: unverified; a member's promote is refused.
	dir := t.TempDir()
	boxFile, _ := imageArchive(t, dir, "box")
	r = dev.gpuaas(t, "", "image", "import", "box", boxFile, "--json", "trust,scope,project")
	if r.code != 0 || !strings.Contains(r.stdout, `"trust":"unverified"`) || !strings.Contains(r.stdout, `"project":"dev"`) {
		t.Fatalf("image import: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "--context", "ada", "image", "promote", "box"); r.code != 5 || !strings.Contains(r.stderr, "owners") {
		t.Fatalf("a member's promote: exit %d, stderr %q; want 5", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "image", "promote", "box"); r.code != 8 || !strings.Contains(r.stderr, "only a verified image is promoted") {
		t.Fatalf("promote unverified: exit %d, stderr %q; want 8", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "image", "verify", "box"); r.code != 0 || !strings.Contains(r.stderr, "verified") {
		t.Fatalf("verify: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "image", "promote", "box"); r.code != 0 {
		t.Fatalf("promote: exit %d, stderr %q", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "", "--context", "ada", "image", "get", "box", "--jq", ".lifecycle + \" \" + .trust")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "promoted verified" {
		t.Fatalf("ada's image get: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// A layer whose bytes no longer match its digest.
	badFile, bad := imageArchive(t, dir, "bad")
	if r := dev.gpuaas(t, "", "image", "import", "bad", badFile); r.code != 0 {
		t.Fatalf("import bad: exit %d %s", r.code, r.stderr)
	}
	layers, _ := bad.Layers()
	ld, _ := layers[0].Digest()
	blob := filepath.Join(data, "registry", ld.Algorithm, ld.Hex)
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(blob, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r = dev.gpuaas(t, "", "image", "verify", "bad")
	if r.code != 1 || !strings.Contains(r.stderr, "layer 1 ("+ld.String()+"): digest mismatch") {
		t.Fatalf("verify of a tampered layer: exit %d, stderr %q; want 1 with the reason", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "", "image", "get", "bad")
	if r.code != 0 || !strings.Contains(r.stdout, "trust:      failed_verification (layer 1") {
		t.Fatalf("image get bad: exit %d, stdout %q", r.code, r.stdout)
	}

	// Revoked: the state and its reason show; the image is gone for users.
	if r := dev.gpuaas(t, "", "image", "revoke", "box", "--reason", "CVE-2026-0001"); r.code != 0 ||
		!strings.Contains(r.stderr, "promoted, revoked (CVE-2026-0001)") {
		t.Fatalf("revoke: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "image", "get", "box"); r.code != 0 || !strings.Contains(r.stdout, "revoked (CVE-2026-0001)") {
		t.Fatalf("get after revoke: exit %d, stdout %q", r.code, r.stdout)
	}

	// Bad input: refused with the field named, exit codes by the catalog.
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"image", "publish", "x", "--ref", "gpuaas/box"}, 7, "neither a digest nor a tag"},
		{[]string{"image", "publish", "Bad Name", "--ref", "gpuaas/box:latest"}, 7, "image name"},
		{[]string{"image", "get", "ghost"}, 6, "no image ghost"},
		{[]string{"--context", "ada", "image", "publish", "mine", "--ref", imgs[0].Ref, "--platform"}, 5, "operators"},
		{[]string{"--context", "ada", "image", "list", "--all"}, 5, "operators"},
	} {
		if r := dev.gpuaas(t, "", tt.args...); r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("gpuaas %v: exit %d, stderr %q; want %d with %q", tt.args, r.code, r.stderr, tt.code, tt.want)
		}
	}
}
