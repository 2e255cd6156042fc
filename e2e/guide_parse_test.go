package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGuideParser: the guide's blocks are read with their markers, other
// fenced blocks are ignored, and the path mapping touches only system
// paths, so TestOperatorGuide runs what the guide says and nothing else.
func TestGuideParser(t *testing.T) {
	doc := "# Guide\n\n<!-- guide-test: settings -->\n```sh\nA=1\nB_2=x\n```\n\n" +
		"```sql\nSELECT 1;\n```\n\n<!-- guide-test: run expect=\"ok\" -->\n```sh\necho ok > /etc/gpuaas/x\n```\n"
	path := filepath.Join(t.TempDir(), "guide.md")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := parseGuide(t, path)
	if len(steps) != 2 || steps[0].kind != "settings" || steps[1].kind != "run" || steps[1].args != `expect="ok"` {
		t.Fatalf("got %+v; want a settings and a run step", steps)
	}
	if got, want := settingNames(steps[0].text), []string{"A", "B_2"}; !slices.Equal(got, want) {
		t.Errorf("settings: got %v; want %v", got, want)
	}
	if got, want := settingsBlock(t, steps[0].text, map[string]string{"A": "it's", "B_2": "y"}), "A='it'\\''s'\nB_2='y'\n"; got != want {
		t.Errorf("settings block: got %q; want %q", got, want)
	}

	tests := []struct {
		name, in, want string
	}{
		{"argument", "install -m 0755 gpuaas /usr/bin/gpuaas", "install -m 0755 gpuaas /R/usr/bin/gpuaas"},
		{"relative path kept", "cp packaging/etc/x.env /etc/gpuaas/", "cp packaging/etc/x.env /R/etc/gpuaas/"},
		{"after = and :", "LoadCredential=k:/etc/gpuaas/k", "LoadCredential=k:/R/etc/gpuaas/k"},
		{"quoted", `store_dir: "/var/lib/nats/1"`, `store_dir: "/R/var/lib/nats/1"`},
		{"url kept", "https://host/etc/x", "https://host/etc/x"},
		{"other dirs kept", "/run/postgresql /tmp/x", "/run/postgresql /tmp/x"},
	}
	for _, tt := range tests {
		if got := rootPaths(tt.in, "/R"); got != tt.want {
			t.Errorf("%s: rootPaths(%q) = %q; want %q", tt.name, tt.in, got, tt.want)
		}
	}

	env := map[string]string{"CREDENTIALS_DIRECTORY": "/c", "FLAGS": "--a=1  --b"}
	got := expandExec(strings.Fields("/bin/x --key=${CREDENTIALS_DIRECTORY}/k $FLAGS $EMPTY"), env)
	if want := []string{"/bin/x", "--key=/c/k", "--a=1", "--b"}; !slices.Equal(got, want) {
		t.Errorf("expandExec: got %q; want %q", got, want)
	}
}
