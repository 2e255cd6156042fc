package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// notKinds are Event* constants that name no event kind.
var notKinds = map[string]bool{"EventStreamName": true, "EventSubjectPrefix": true}

// TestEventKindsListsEveryKind fails on an event kind declared in this
// package (a string constant named Event*) that api.EventKinds lacks:
// `gpuaas watch` would have no line for it.
func TestEventKindsListsEveryKind(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	found := 0
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "Event") || notKinds[name.Name] || i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				kind, _ := strconv.Unquote(lit.Value)
				found++
				if !slices.Contains(api.EventKinds, kind) {
					t.Errorf("api.%s = %q is not in api.EventKinds", name.Name, kind)
				}
			}
			return true
		})
	}
	if found < len(api.EventKinds) {
		t.Errorf("found %d Event* kind constants; want at least the %d of api.EventKinds", found, len(api.EventKinds))
	}
	seen := map[string]bool{}
	for _, k := range api.EventKinds {
		if seen[k] {
			t.Errorf("%q is in api.EventKinds twice", k)
		}
		seen[k] = true
	}
}
