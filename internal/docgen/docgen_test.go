package docgen_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/gpuaas/gpuaas/cli"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/docgen"
)

// TestGeneratedDocsAreFresh fails when man/ or completions/ differ from
// what the command tree generates: run `go generate ./...`.
func TestGeneratedDocsAreFresh(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	files, err := docgen.Files(cli.Root(cmdutil.New(ios)))
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join("..", "..")
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(repo, name))
		if err != nil {
			t.Errorf("%s is missing: run `go generate ./...`", name)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go generate ./...`", name)
		}
	}
	for _, dir := range []string{"man", "completions"} {
		entries, err := os.ReadDir(filepath.Join(repo, dir))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var extra []string
		for _, e := range entries {
			if _, ok := files[filepath.Join(dir, e.Name())]; !ok {
				extra = append(extra, e.Name())
			}
		}
		sort.Strings(extra)
		if len(extra) > 0 {
			t.Errorf("%s has files no command generates: %v (run `go generate ./...`)", dir, extra)
		}
	}
	if _, ok := files[filepath.Join("man", "gpuaas-alloc-create.1")]; !ok {
		t.Errorf("no man page for gpuaas alloc create; generated %d files", len(files))
	}
}
