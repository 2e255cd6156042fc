package packaging_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaas/gpuaas/cli"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/sshgate"
)

const repo = ".."

// goreleaser is the part of .goreleaser.yaml these tests read.
type goreleaser struct {
	Archives []struct {
		Files []string `yaml:"files"`
	} `yaml:"archives"`
	NFPMs []struct {
		Formats  []string `yaml:"formats"`
		Contents []struct {
			Src  string `yaml:"src"`
			Dst  string `yaml:"dst"`
			Type string `yaml:"type"`
		} `yaml:"contents"`
		Scripts map[string]string `yaml:"scripts"`
	} `yaml:"nfpms"`
}

func load(t *testing.T) goreleaser {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var g goreleaser
	if err := yaml.Unmarshal(b, &g); err != nil {
		t.Fatalf("parse .goreleaser.yaml: %v", err)
	}
	if len(g.NFPMs) != 1 || len(g.Archives) != 1 {
		t.Fatalf("got %d nfpms and %d archives; want one of each", len(g.NFPMs), len(g.Archives))
	}
	return g
}

// glob expands a goreleaser source pattern, relative to the repository.
func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(repo, strings.TrimPrefix(pattern, "./")))
	if err != nil {
		t.Fatalf("pattern %q: %v", pattern, err)
	}
	for i := range m {
		m[i], _ = filepath.Rel(repo, m[i])
	}
	return m
}

// generated lists the files `go generate ./...` writes, as they are in the
// repository (the docgen test keeps them fresh).
func generated(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"man", "completions"} {
		entries, err := os.ReadDir(filepath.Join(repo, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			files = append(files, path.Join(dir, e.Name()))
		}
	}
	if len(files) < 10 {
		t.Fatalf("got %d generated files; want man pages and completions (run `go generate ./...`)", len(files))
	}
	return files
}

// TestPackagedFilesExist: every source the packages and archives name
// exists, and every generated doc, unit and setting file is packaged, so
// the config cannot drift from `go generate` or from packaging/.
func TestPackagedFilesExist(t *testing.T) {
	g := load(t)
	nfpm := g.NFPMs[0]
	if !slices.Contains(nfpm.Formats, "deb") || !slices.Contains(nfpm.Formats, "rpm") {
		t.Errorf("nfpm formats %v; want deb and rpm", nfpm.Formats)
	}
	inPackage := map[string]string{} // repository file → installed path
	for _, c := range nfpm.Contents {
		if c.Type == "dir" {
			continue
		}
		m := glob(t, c.Src)
		if len(m) == 0 {
			t.Errorf("nfpm source %q matches no file", c.Src)
		}
		for _, f := range m {
			dst := c.Dst
			if strings.HasSuffix(dst, "/") {
				dst += filepath.Base(f)
			}
			inPackage[f] = dst
		}
	}
	for name, script := range nfpm.Scripts {
		if st, err := os.Stat(filepath.Join(repo, script)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("nfpm %s script %s: %v; want an executable file", name, script, err)
		}
	}
	inArchive := map[string]bool{}
	for _, pattern := range g.Archives[0].Files {
		m := glob(t, pattern)
		if len(m) == 0 {
			t.Errorf("archive file pattern %q matches no file", pattern)
		}
		for _, f := range m {
			inArchive[f] = true
		}
	}

	for _, f := range generated(t) {
		if !inArchive[f] {
			t.Errorf("generated %s is not in the archives", f)
		}
		if _, ok := inPackage[f]; !ok && f != "completions/gpuaas.ps1" { // PowerShell: archives only
			t.Errorf("generated %s is not in the deb/rpm packages", f)
		}
	}
	units := glob(t, "packaging/systemd/*.service")
	if len(units) != 3 {
		t.Errorf("got units %v; want controld, sshgate and hostd", units)
	}
	for _, u := range units {
		if got, want := inPackage[u], "/usr/lib/systemd/system/"+filepath.Base(u); got != want {
			t.Errorf("unit %s installs at %q; want %s", u, got, want)
		}
		for _, env := range directives(t, u)["EnvironmentFile"] {
			env = strings.TrimPrefix(env, "-")
			found := false
			for src, dst := range inPackage {
				found = found || (dst == env && strings.HasPrefix(src, "packaging/etc/"))
			}
			if !found {
				t.Errorf("unit %s reads %s, which the packages do not install", u, env)
			}
		}
	}
	for _, f := range glob(t, "packaging/etc/*") {
		if _, ok := inPackage[f]; !ok {
			t.Errorf("%s is not in the packages", f)
		}
	}
}

// directives reads a unit file's Key=value lines.
func directives(t *testing.T, unit string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, unit))
	if err != nil {
		t.Fatal(err)
	}
	d := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			d[k] = append(d[k], v)
		}
	}
	return d
}

// TestUnitsRunRealCommands: each unit's ExecStart is `gpuaas <daemon>`
// with flags that daemon has, so renaming a flag breaks this test rather
// than a deployment.
func TestUnitsRunRealCommands(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	root := cli.Root(cli.NewFactory(ios))
	for _, u := range glob(t, "packaging/systemd/*.service") {
		exec := directives(t, u)["ExecStart"]
		if len(exec) != 1 {
			t.Errorf("%s: %d ExecStart lines; want 1", u, len(exec))
			continue
		}
		args := strings.Fields(exec[0])
		if args[0] != "/usr/bin/gpuaas" || len(args) < 2 {
			t.Errorf("%s: ExecStart %q; want /usr/bin/gpuaas <daemon>", u, exec[0])
			continue
		}
		want := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(u), "gpuaas-"), ".service")
		cmd, _, err := root.Find(args[1:2])
		if err != nil || cmd.Name() != want {
			t.Errorf("%s: ExecStart runs %q; want the %s command", u, args[1], want)
			continue
		}
		for _, a := range args[2:] {
			if strings.HasPrefix(a, "$") {
				continue // the settings file's extra flags
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") || cmd.Flags().Lookup(name) == nil {
				t.Errorf("%s: gpuaas %s has no flag %q", u, want, a)
			}
		}
	}
}

// TestUnitsVerify runs systemd-analyze verify on the units (with a
// stand-in binary), which reports unknown keys and bad values.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	dir := t.TempDir()
	var units []string
	for _, u := range glob(t, "packaging/systemd/*.service") {
		b, err := os.ReadFile(filepath.Join(repo, u))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("/usr/bin/gpuaas"), []byte("/bin/true")), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, units...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestUnitsStopGracefully: systemd stop sends SIGTERM to the daemon alone
// (KillMode=mixed: not to the shells and helpers it stops in order itself)
// and waits longer than the daemon's drain takes before SIGKILL: the
// gateway's shutdown, controld's and hostd's --drain-timeout defaults.
func TestUnitsStopGracefully(t *testing.T) {
	// Telling sessions and closing connections (about 2 s), then
	// ShutdownGrace for recordings and index entries; the drains, then
	// closing the connections and the pool.
	minStop := map[string]time.Duration{
		"gpuaas-sshgate.service":  sshgate.DefaultShutdownGrace + 5*time.Second,
		"gpuaas-controld.service": controld.DefaultDrainTimeout + 5*time.Second,
		"gpuaas-hostd.service":    agent.DefaultDrainTimeout + 5*time.Second,
	}
	units := glob(t, "packaging/systemd/*.service")
	if len(units) != len(minStop) {
		t.Errorf("units %q; want one of each of %v", units, minStop)
	}
	for _, u := range units {
		d := directives(t, u)
		if got := d["KillMode"]; len(got) != 1 || got[0] != "mixed" {
			t.Errorf("%s: KillMode %q; want mixed", u, got)
		}
		got := d["TimeoutStopSec"]
		if len(got) != 1 {
			t.Errorf("%s: TimeoutStopSec %q; want one", u, got)
			continue
		}
		want, ok := minStop[path.Base(u)]
		if !ok {
			t.Errorf("%s: no drain known for this unit", u)
			continue
		}
		stop, err := time.ParseDuration(got[0])
		if err != nil || stop < want {
			t.Errorf("%s: TimeoutStopSec %q; want a duration of at least %s", u, got[0], want)
		}
	}
}
