package pgserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// installHint is part of every ErrNotInstalled error: the one thing to do about it.
const installHint = "install them with `apt-get install postgresql` (Debian/Ubuntu), " +
	"`dnf install postgresql-server` or `brew install postgresql`"

// serverBinaries are the programs a directory must hold to be used as BinDir.
var serverBinaries = []string{"initdb", "postgres"}

// findBinDir returns dir if it holds the server binaries, or, when dir is
// empty, the first of `pg_config --bindir`, the newest
// /usr/lib/postgresql/*/bin and the directory of initdb on PATH that does.
func findBinDir(dir string) (string, error) {
	if dir != "" {
		if hasServerBinaries(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%w in %s: %s", ErrNotInstalled, dir, installHint)
	}
	for _, candidate := range binDirCandidates() {
		if hasServerBinaries(candidate) {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrNotInstalled, installHint)
}

// binDirCandidates lists the directories findBinDir tries, best first.
func binDirCandidates() []string {
	var dirs []string
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := exec.CommandContext(ctx, pgConfig, "--bindir").Output()
		cancel()
		if err == nil {
			dirs = append(dirs, strings.TrimSpace(string(out)))
		}
	}
	// Debian and Ubuntu keep each major version apart and put none on PATH.
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versioned, func(a, b string) int {
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	dirs = append(dirs, versioned...)
	if initdb, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(initdb))
	}
	return dirs
}

// compareVersions compares dotted version numbers such as "9.6" and "15".
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// hasServerBinaries reports whether dir holds executable initdb and postgres.
func hasServerBinaries(dir string) bool {
	for _, name := range serverBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}
