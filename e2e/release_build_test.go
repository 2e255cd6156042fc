package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestReleaseBuildHasNoFaultFlags builds gpuaas as .goreleaser.yaml's
// builds do (their flags and environment, no build tag) and checks that
// hostd has no --fail-phase or --delay-phase, which the test binary
// (built with -tags faultinject) has: fault injection is test equipment
// and never ships.
func TestReleaseBuildHasNoFaultFlags(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Builds []struct {
			ID    string   `yaml:"id"`
			Main  string   `yaml:"main"`
			Env   []string `yaml:"env"`
			Flags []string `yaml:"flags"`
			Tags  []string `yaml:"tags"`
		} `yaml:"builds"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil || len(cfg.Builds) == 0 {
		t.Fatalf("parse .goreleaser.yaml: %v (%d builds)", err, len(cfg.Builds))
	}
	for _, build := range cfg.Builds {
		for _, v := range append(append([]string{}, build.Tags...), build.Flags...) {
			if strings.Contains(v, "faultinject") {
				t.Errorf("goreleaser build %s has %q; want no faultinject tag in a release", build.ID, v)
			}
		}
	}
	build := cfg.Builds[0]
	release := filepath.Join(t.TempDir(), "gpuaas-release")
	args := append([]string{"build"}, build.Flags...)
	if len(build.Tags) > 0 {
		args = append(args, "-tags", strings.Join(build.Tags, ","))
	}
	args = append(args, "-o", release, filepath.Join("..", build.Main))
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), build.Env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}

	help := func(bin string) string {
		t.Helper()
		out, err := exec.Command(bin, "hostd", "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s hostd --help: %v\n%s", bin, err, out)
		}
		return string(out)
	}
	for _, flag := range []string{"--fail-phase", "--delay-phase"} {
		if h := help(release); strings.Contains(h, flag) {
			t.Errorf("the release build's hostd --help has %s:\n%s", flag, h)
		}
		if h := help(binary); !strings.Contains(h, flag) {
			t.Errorf("the test build's hostd --help lacks %s:\n%s", flag, h)
		}
	}
	// --print-config: were the flag there, hostd would print and stop,
	// never run.
	out, err := exec.Command(release, "hostd", "--sim", "h100-baremetal", "--fail-phase", "user_create", "--print-config").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown flag: --fail-phase") {
		t.Errorf("release build: hostd --fail-phase: %v\n%s\nwant an unknown flag", err, out)
	}
	// The release build still runs the sim: only the fault switches go.
	if h := help(release); !strings.Contains(h, "--sim") {
		t.Errorf("the release build's hostd --help lacks --sim:\n%s", h)
	}
}
