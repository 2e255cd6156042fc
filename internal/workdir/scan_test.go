package workdir

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// mkfiles makes files (path → content) under root.
func mkfiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func rels(p *Plan) []string {
	var out []string
	for _, e := range p.Entries {
		out = append(out, e.Rel)
	}
	return out
}

func TestScanKeepsWhatIsNotIgnored(t *testing.T) {
	root := t.TempDir()
	mkfiles(t, root, map[string]string{
		".gitignore":           "*.bin\nbuild/\n",
		".gpuaasignore":        "!weights.bin\nnotes.txt\n",
		"train.py":             "print(1)\n",
		"weights.bin":          "w",
		"big.bin":              "b",
		"notes.txt":            "n",
		"build/out.o":          "o",
		"src/.gitignore":       "generated.py\n!keep.bin\n",
		"src/model.py":         "m",
		"src/generated.py":     "g",
		"src/keep.bin":         "k",
		".git/HEAD":            "ref: refs/heads/main\n",
		"src/sub/.git/objects": "x",
	})
	p, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", ".gpuaasignore", "src", "src/.gitignore", "src/keep.bin", "src/model.py", "src/sub", "train.py", "weights.bin"}
	if got := rels(p); !slices.Equal(got, want) {
		t.Errorf("kept %q; want %q", got, want)
	}
}

func TestScanSendsLinksWithoutFollowingThem(t *testing.T) {
	outside := t.TempDir()
	mkfiles(t, outside, map[string]string{"secret/key": "do not send"})
	root := t.TempDir()
	mkfiles(t, root, map[string]string{"a.txt": "a"})
	for name, target := range map[string]string{"out": filepath.Join(outside, "secret"), "up": "../x", "in": "a.txt"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rels(p), []string{"a.txt", "in", "out", "up"}; !slices.Equal(got, want) {
		t.Fatalf("kept %q; want %q (the link to a directory outside is not entered)", got, want)
	}
	for _, e := range p.Entries {
		if e.Rel == "out" && (e.Kind != KindLink || e.Target != filepath.Join(outside, "secret")) {
			t.Errorf("out: %+v; want a link to %s", e, filepath.Join(outside, "secret"))
		}
	}
	if len(p.Warnings) != 2 || !strings.Contains(strings.Join(p.Warnings, "\n"), "outside the workdir") {
		t.Errorf("warnings %q; want two about links outside the workdir (out, up)", p.Warnings)
	}
	if p.Bytes != 1 {
		t.Errorf("bytes %d; want 1 (only a.txt's)", p.Bytes)
	}
}

func TestScanSkipsSpecialFilesWithAWarning(t *testing.T) {
	root := t.TempDir()
	mkfiles(t, root, map[string]string{"a.txt": "a"})
	if err := syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := rels(p); !slices.Equal(got, []string{"a.txt"}) {
		t.Errorf("kept %q; want only a.txt", got)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "pipe skipped: a special file") {
		t.Errorf("warnings %q; want one about pipe", p.Warnings)
	}
}

func TestScanRefusesAMissingOrOversizedWorkdir(t *testing.T) {
	root := t.TempDir()
	if _, err := Scan(filepath.Join(root, "nope")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing dir: %v; want does not exist", err)
	}
	mkfiles(t, root, map[string]string{"f": "x"})
	if _, err := Scan(filepath.Join(root, "f")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file: %v; want not a directory", err)
	}
	// A sparse file just over the bound: refused from its size alone.
	big := filepath.Join(root, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxBytes + 1); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if _, err := Scan(root); err == nil || !strings.Contains(err.Error(), "at most 2.0 GiB") {
		t.Errorf("oversized: %v; want a refusal naming the bound", err)
	}
	// Ignored, it no longer counts.
	mkfiles(t, root, map[string]string{".gpuaasignore": "big\n"})
	if p, err := Scan(root); err != nil || p.Bytes != int64(len("x")+len("big\n")) {
		t.Errorf("with big ignored: %v, %+v; want it scanned without big", err, p)
	}
}
