package e2e

import (
	"strings"
	"testing"
)

// TestAppVerbsNameTheirScope: through the built binary and `gpuaas dev`
// (docs/apps.md, "Publishing apps"): with the seeded platform app tiny
// and an app tiny of the dev project, `app get tiny` and `app promote
// tiny` are refused naming both (exit 7) and nothing moves; --platform
// and -p pick theirs; both at once is a usage error; a name shaped like
// an id is refused at publish.
func TestAppVerbsNameTheirScope(t *testing.T) {
	needPodman(t)
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	manifest := writeFile(t, cfg, "tiny.yaml", "name: tiny\nimage: tiny\n")
	if r := dev.gpuaas(t, "", "app", "publish", "-f", manifest, "--json", "scope,project"); r.code != 0 ||
		!strings.Contains(r.stdout, `"project":"dev"`) {
		t.Fatalf("publish the dev project's tiny: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	both := "tiny is both a platform app and an app of project dev: say --platform or --project"
	for _, verb := range []string{"get", "promote", "retire"} {
		if r := dev.gpuaas(t, "", "app", verb, "tiny"); r.code != 7 || !strings.Contains(r.stderr, both) {
			t.Errorf("app %s tiny: exit %d %q; want 7 naming both", verb, r.code, r.stderr)
		}
	}
	if r := dev.gpuaas(t, "", "app", "get", "tiny", "--platform", "--jq", `.scope + " " + .lifecycle`); r.code != 0 ||
		strings.TrimSpace(r.stdout) != "platform promoted" {
		t.Errorf("app get tiny --platform: exit %d %q %q; want the platform's, promoted", r.code, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "-p", "dev", "app", "deprecate", "tiny"); r.code != 0 {
		t.Errorf("-p dev app deprecate tiny: exit %d %q", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "-p", "dev", "app", "get", "tiny", "--jq", `.scope + " " + .lifecycle`); r.code != 0 ||
		strings.TrimSpace(r.stdout) != "project deprecated" {
		t.Errorf("-p dev app get tiny: exit %d %q %q; want the project's, deprecated", r.code, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "app", "get", "tiny", "--platform", "--jq", ".lifecycle"); r.code != 0 || strings.TrimSpace(r.stdout) != "promoted" {
		t.Errorf("the platform's tiny after the project's was deprecated: exit %d %q; want promoted", r.code, r.stdout)
	}
	if r := dev.gpuaas(t, "", "-p", "dev", "app", "get", "tiny", "--platform"); r.code == 0 || !strings.Contains(r.stderr, "--platform and -p/--project") {
		t.Errorf("-p dev app get tiny --platform: exit %d %q; want a usage error", r.code, r.stderr)
	}
	shaped := writeFile(t, cfg, "shaped.yaml", "name: w-0123456789ab\nimage: tiny\n")
	if r := dev.gpuaas(t, "", "app", "publish", "-f", shaped); r.code != 7 || !strings.Contains(r.stderr, "has the shape of an id") {
		t.Errorf("publish w-0123456789ab: exit %d %q; want 7 naming the name", r.code, r.stderr)
	}
}
