package scripts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo is a `go` command for scripts/fuzz: `go test -list` names one
// target, FuzzX; a fuzzing run appends its -fuzztime to $FAKE_LOG and does
// what $FAKE_DURATION (a -fuzztime with a duration) or $FAKE_COUNT (one
// with a count, Nx) says: "ok", "deadline" (the coordinator's bare
// deadline after 34 inputs, go.dev/issue/75804), or "finding" (an input
// written to testdata/fuzz/FuzzX, as go test does), or "other" (a failure
// of the target's own).
const fakeGo = `#!/usr/bin/env bash
case " $* " in *" -list "*) echo FuzzX; echo "ok  	example/pkg	0.01s"; exit 0 ;; esac
ft=""; prev=""
for a in "$@"; do [ "$prev" = -fuzztime ] && ft="$a"; prev="$a"; done
echo "$ft" >>"$FAKE_LOG"
case "$ft" in *x) mode="$FAKE_COUNT" ;; *) mode="$FAKE_DURATION" ;; esac
echo "fuzz: elapsed: 3s, execs: 34 (11/sec), new interesting: 0 (total: 20)"
case "$mode" in
ok) echo PASS; exit 0 ;;
deadline) printf -- '--- FAIL: FuzzX (4.06s)\n    context deadline exceeded\nFAIL\n'; exit 1 ;;
finding)
  mkdir -p pkg/testdata/fuzz/FuzzX && echo 'go test fuzz v1' >pkg/testdata/fuzz/FuzzX/0123
  printf -- '--- FAIL: FuzzX (0.10s)\n    context deadline exceeded\nFAIL\n'; exit 1 ;;
other) printf -- '--- FAIL: FuzzX (0.10s)\n    x_test.go:5: bad\nFAIL\n'; exit 1 ;;
esac
`

// fuzzRun runs a copy of scripts/fuzz in a tree with one fuzz target and
// the fake go first in PATH; it returns the output, the exit code and the
// -fuzztime of each run of the target.
func fuzzRun(t *testing.T, duration, count string) (string, int, []string) {
	t.Helper()
	tree, bin := t.TempDir(), t.TempDir()
	for dir, files := range map[string]map[string]string{
		filepath.Join(tree, "scripts"): {},
		filepath.Join(tree, "pkg"):     {"x_test.go": "package pkg\n\nimport \"testing\"\n\nfunc FuzzX(f *testing.F) {}\n"},
		bin:                            {"go": fakeGo},
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyFile(t, filepath.Join(repoRoot(t), "scripts", "fuzz"), filepath.Join(tree, "scripts", "fuzz"))
	if err := os.Chmod(filepath.Join(tree, "scripts", "fuzz"), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "runs")
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_LOG="+log,
		"FAKE_DURATION="+duration, "FAKE_COUNT="+count, "FUZZTIME=3s")
	out, code := run(t, tree, env, "./scripts/fuzz")
	runs, _ := os.ReadFile(log)
	return out, code, strings.Fields(string(runs))
}

// TestFuzzDeadlineRaceIsRunAgainByCount: the CI failure "--- FAIL:
// FuzzLinkFrames (4.06s) context deadline exceeded" after 34 inputs and no
// input written was Go's fuzzing coordinator, not a finding; the target
// is run again for 34 inputs by count, which passes.
func TestFuzzDeadlineRaceIsRunAgainByCount(t *testing.T) {
	out, code, runs := fuzzRun(t, "deadline", "ok")
	if code != 0 || strings.Join(runs, " ") != "3s 34x" || !strings.Contains(out, "go.dev/issue/75804") {
		t.Fatalf("exit %d, runs %q:\n%s", code, runs, out)
	}
}

// TestFuzzFailsWhenTheCountRunFails: the run by count decides.
func TestFuzzFailsWhenTheCountRunFails(t *testing.T) {
	out, code, runs := fuzzRun(t, "deadline", "deadline")
	if code != 1 || strings.Join(runs, " ") != "3s 34x" || !strings.Contains(out, "FAIL pkg FuzzX") {
		t.Fatalf("exit %d, runs %q:\n%s", code, runs, out)
	}
}

// TestFuzzFindingIsNeverRunAgain: an input written to testdata/fuzz is a
// finding whatever the output says, and so is any other failure.
func TestFuzzFindingIsNeverRunAgain(t *testing.T) {
	for _, mode := range []string{"finding", "other"} {
		out, code, runs := fuzzRun(t, mode, "ok")
		if code != 1 || strings.Join(runs, " ") != "3s" || !strings.Contains(out, "FAIL pkg FuzzX") {
			t.Fatalf("%s: exit %d, runs %q:\n%s", mode, code, runs, out)
		}
	}
}
