package docgen_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/docgen"
)

// TestGeneratedDocsAreFresh fails when man/ or completions/ differ from
// what the command tree generates: run `go generate ./...`.
func TestGeneratedDocsAreFresh(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	files, err := docgen.Files(cli.Root(cli.NewFactory(ios)))
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

// TestManPageHeadedByItsCommand: every man page was headed GPUAAS(1),
// whatever its command. Each page's .TH line names the page's command.
func TestManPageHeadedByItsCommand(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	files, err := docgen.Files(cli.Root(cli.NewFactory(ios)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want string
	}{
		{"gpuaas.1", `.TH "GPUAAS" "1"`},
		{"gpuaas-alloc-create.1", `.TH "GPUAAS-ALLOC-CREATE" "1"`},
		{"gpuaas-admin-user-add.1", `.TH "GPUAAS-ADMIN-USER-ADD" "1"`},
	}
	for _, tt := range tests {
		page, ok := files[filepath.Join("man", tt.name)]
		if !ok {
			t.Errorf("no man page %s", tt.name)
			continue
		}
		if !bytes.Contains(page, []byte(tt.want)) {
			t.Errorf("%s: got header %q; want %q", tt.name, firstTH(page), tt.want)
		}
	}
	// Every page: the title is its file name, upper-cased.
	for name, page := range files {
		if filepath.Dir(name) != "man" {
			continue
		}
		base := strings.TrimSuffix(filepath.Base(name), ".1")
		want := `.TH "` + strings.ToUpper(base) + `" "1"`
		if got := firstTH(page); !strings.HasPrefix(got, want) {
			t.Errorf("%s: got header %q; want it to start %q", name, got, want)
		}
	}
}

// firstTH returns the .TH line of a man page.
func firstTH(page []byte) string {
	for _, line := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(line, ".TH ") {
			return line
		}
	}
	return ""
}

// TestAPIReferenceIsFresh fails when docs/api.md differs from what the
// endpoint declarations generate (run `go generate ./...`), and when a
// declared endpoint has no doc comment saying what it does.
func TestAPIReferenceIsFresh(t *testing.T) {
	repo := filepath.Join("..", "..")
	docs, err := docgen.EndpointDocs(docgen.ProtocolDirs(repo)...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := docgen.APIReference(docs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repo, docgen.APIRefPath))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s is missing or stale (%v): run `go generate ./...`", docgen.APIRefPath, err)
	}
	if n := bytes.Count(want, []byte("\n| `")); n != len(api.Endpoints()) {
		t.Errorf("the reference lists %d endpoints; %d are declared", n, len(api.Endpoints()))
	}
}

// TestAPIReferenceRefusesAnUndocumentedEndpoint: an endpoint whose
// declaration has no comment fails generation, naming it.
func TestAPIReferenceRefusesAnUndocumentedEndpoint(t *testing.T) {
	docs, err := docgen.EndpointDocs(docgen.ProtocolDirs(filepath.Join("..", ".."))...)
	if err != nil {
		t.Fatal(err)
	}
	delete(docs, api.EndpointAllocGet)
	if _, err := docgen.APIReference(docs); err == nil || !strings.Contains(err.Error(), api.EndpointAllocGet) {
		t.Fatalf("got %v; want an error naming %s", err, api.EndpointAllocGet)
	}
}
