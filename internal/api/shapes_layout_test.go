package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// shapeReaders are the places outside this package allowed to name a
// shape (ShapeGPUSlice, ShapeBaremetal): the scheduler (where an
// allocation goes and which task makes its environment), the catalog (the
// SKUs' shapes), and hostd, whose own test lists its files
// (hostd/env/layout_test.go: the environment factory and the files about
// the node's hardware). Everything else asks these or the helpers in
// shapes.go, so a new workload kind does not add a case everywhere.
var shapeReaders = []string{"controld/sched/", "controld/catalog/", "hostd/"}

// TestShapeReadOnlyWhereAllowed walks the module's non-test Go files and
// fails on a use of a shape constant outside shapeReaders.
func TestShapeReadOnlyWhereAllowed(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	scanned, seenAllowed := 0, map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "internal/api/") {
			return nil
		}
		scanned++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("parse %s: %v", rel, err)
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "ShapeGPUSlice" && sel.Sel.Name != "ShapeBaremetal") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "api" {
				return true
			}
			for _, p := range shapeReaders {
				if strings.HasPrefix(rel, p) {
					seenAllowed[p] = true
					return true
				}
			}
			t.Errorf("%s names api.%s: ask the scheduler, the catalog or a helper in internal/api/shapes.go instead", rel, sel.Sel.Name)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("scanned %d files under %s; the walk is broken", scanned, root)
	}
	for _, p := range shapeReaders {
		if !seenAllowed[p] {
			t.Errorf("%s names no shape: remove it from shapeReaders (or the walk no longer sees it)", p)
		}
	}
}
