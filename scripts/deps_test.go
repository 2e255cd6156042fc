// Package scripts_test checks scripts/deps, the set-up step `make dev` and
// `make test` run first on a fresh machine.
package scripts_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the checkout this test runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// run runs name args in dir and returns its combined output and exit code.
func run(t *testing.T, dir string, env []string, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("%s %v: %v\n%s", name, args, err, out.String())
		return "", -1
	}
}

// TestMakeDevWithoutPostgresPrintsTheCommand is the fresh-machine case of
// issue [3/7]: `make build && ./gpuaas dev` failed on a Debian machine
// without PostgreSQL. Here the PostgreSQL binaries are hidden (a private
// mount namespace with an empty /usr/lib/postgresql and a PATH without
// initdb) and the script runs as an unprivileged user, who cannot install
// packages: it must name what is missing and the exact command, and stop.
func TestMakeDevWithoutPostgresPrintsTheCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hide /usr/lib/postgresql in a mount namespace and to switch to nobody")
	}
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (util-linux)", tool)
		}
	}
	root := repoRoot(t)
	goDir := filepath.Dir(mustLookPath(t, "go"))
	// The user gets a GOPATH and cache of their own (nobody's HOME does
	// not exist) and a PATH with go but no PostgreSQL.
	home := t.TempDir()
	if err := os.Chmod(home, 0o777); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PATH=" + goDir + ":/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home,
		"GOPATH=" + filepath.Join(home, "go"),
		"GOCACHE=" + filepath.Join(home, "cache"),
		"GOTOOLCHAIN=local",
	}
	script := `set -e
for d in /usr/lib/postgresql /usr/local/lib/postgresql; do [ -d "$d" ] && mount -t tmpfs none "$d"; done
exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"`
	check := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		full := append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh"}, args...)
		return run(t, root, env, "unshare", full...)
	}

	t.Run("script", func(t *testing.T) {
		out, code := check(t, "./scripts/deps", "dev")
		if code != 1 {
			t.Fatalf("scripts/deps dev without PostgreSQL exited %d, want 1:\n%s", code, out)
		}
		for _, want := range []string{
			"missing: postgresql",
			"run:  sudo apt-get install -y postgresql",
			"then run this command again",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "installing") {
			t.Errorf("an unprivileged run tried to install:\n%s", out)
		}
	})

	t.Run("make dev stops before building", func(t *testing.T) {
		// make dev in a copy of what it reads before building (Makefile,
		// scripts/deps, go.mod), which nobody may write: it must stop at
		// deps-dev, before `go build` and before starting anything.
		work := filepath.Join(home, "src")
		for _, f := range []string{"Makefile", "scripts/deps", "go.mod"} {
			copyFile(t, filepath.Join(root, f), filepath.Join(work, f))
		}
		out, code := run(t, work, env, "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh"},
			"make", "dev")...)
		if code == 0 {
			t.Fatalf("make dev without PostgreSQL succeeded:\n%s", out)
		}
		if !strings.Contains(out, "sudo apt-get install -y postgresql") {
			t.Errorf("make dev does not print the install command:\n%s", out)
		}
		if strings.Contains(out, "go build") {
			t.Errorf("make dev went on to build:\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(work, "gpuaas")); err == nil {
			t.Error("make dev built the binary although PostgreSQL is missing")
		}
	})
}

// TestDepsWithEverythingPresentIsQuiet: on a machine that has what `gpuaas
// dev` needs (this one: the tests that run next need PostgreSQL), the
// script changes nothing and says nothing, so make can run it every time.
func TestDepsWithEverythingPresentIsQuiet(t *testing.T) {
	out, code := run(t, repoRoot(t), nil, "./scripts/deps", "dev")
	if code != 0 || out != "" {
		t.Fatalf("scripts/deps dev on a set-up machine: exit %d, output %q", code, out)
	}
}

// TestDepsRefusesAnUnknownMode: a typo is a usage error, not a no-op.
func TestDepsRefusesAnUnknownMode(t *testing.T) {
	out, code := run(t, repoRoot(t), nil, "./scripts/deps", "prod")
	if code != 2 || !strings.Contains(out, "usage: scripts/deps dev|test") {
		t.Fatalf("scripts/deps prod: exit %d, output %q", code, out)
	}
}

// TestMakeTargetsRunDepsFirst: the README's two commands set the machine up
// before they build or test.
func TestMakeTargetsRunDepsFirst(t *testing.T) {
	for target, next := range map[string]string{"dev": "build -o gpuaas", "test": "test -race", "bench": "./scripts/bench"} {
		out, code := run(t, repoRoot(t), nil, "make", "-n", target)
		if code != 0 {
			t.Fatalf("make -n %s: exit %d\n%s", target, code, out)
		}
		deps := strings.Index(out, "./scripts/deps "+target)
		step := strings.Index(out, next)
		if deps < 0 || step < 0 || deps > step {
			t.Errorf("make %s does not run ./scripts/deps %s before %q:\n%s", target, target, next, out)
		}
	}
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not in PATH: %v", name, err)
	}
	return p
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, info.Mode()); err != nil {
		t.Fatal(err)
	}
}
