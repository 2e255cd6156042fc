package packaging_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// TestUnitsReadPackagedSettings: each unit's --config names a settings
// file (directly or through LoadCredential) that the packages install
// from packaging/etc, and that example is a valid settings file of its
// daemon: as shipped (comments only) and with every commented-out key
// uncommented, so a renamed flag breaks this test, not a deployment.
func TestUnitsReadPackagedSettings(t *testing.T) {
	g := load(t)
	installedFrom := map[string]string{} // installed path → repository file
	for _, c := range g.NFPMs[0].Contents {
		if strings.HasPrefix(c.Src, "./packaging/etc/") {
			installedFrom[c.Dst] = strings.TrimPrefix(c.Src, "./")
		}
	}
	units := glob(t, "packaging/systemd/*.service")
	for _, u := range units {
		d := directives(t, u)
		credentials := map[string]string{}
		for _, c := range d["LoadCredential"] {
			name, src, _ := strings.Cut(c, ":")
			credentials[name] = src
		}
		var config string
		for _, a := range strings.Fields(d["ExecStart"][0]) {
			if v, ok := strings.CutPrefix(a, "--config="); ok {
				config = v
			}
		}
		if config == "" {
			t.Errorf("%s: ExecStart has no --config=FILE", u)
			continue
		}
		if name, ok := strings.CutPrefix(config, "${CREDENTIALS_DIRECTORY}/"); ok {
			if config, ok = credentials[name]; !ok {
				t.Errorf("%s: --config names credential %q, which no LoadCredential loads", u, name)
				continue
			}
		}
		example, ok := installedFrom[config]
		if !ok {
			t.Errorf("%s: reads settings %s, which the packages do not install from packaging/etc", u, config)
			continue
		}
		daemon := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(u), "gpuaas-"), ".service")
		b, err := os.ReadFile(filepath.Join(repo, example))
		if err != nil {
			t.Fatal(err)
		}
		uncommented := regexp.MustCompile(`(?m)^#([a-z][a-z0-9-]*:)`).ReplaceAll(b, []byte("$1"))
		if string(uncommented) == string(b) {
			t.Errorf("%s: no commented-out key (#key: value) to show a setting", example)
		}
		for what, text := range map[string][]byte{"as shipped": b, "uncommented": uncommented} {
			out, err := printConfig(t, daemon, text)
			if err != nil {
				t.Errorf("gpuaas %s --config=%s (%s): %v\n%s", daemon, example, what, err, text)
			} else if !strings.Contains(out, "log-level: ") {
				t.Errorf("gpuaas %s --print-config printed %q; want the settings", daemon, out)
			}
		}
	}
}

// printConfig runs `gpuaas DAEMON --config FILE --print-config` with a
// file of the given text and no GPUAAS_ variables.
func printConfig(t *testing.T, daemon string, text []byte) (string, error) {
	t.Helper()
	for _, v := range os.Environ() {
		if k, _, _ := strings.Cut(v, "="); strings.HasPrefix(k, "GPUAAS_") {
			t.Setenv(k, "")
		}
	}
	path := filepath.Join(t.TempDir(), daemon+".yaml")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	ios, _, stdout, _ := cmdutil.Test()
	root := cli.Root(cli.NewFactory(ios))
	root.SetArgs([]string{daemon, "--config", path, "--print-config"})
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	err := root.Execute()
	return stdout.String(), err
}
