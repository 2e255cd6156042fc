package env_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The environment's layout rules (docs/decisions/0011-environment.md):
// hostd/term serves the SSH protocol and reaches allocations only through
// hostd/env, so it imports neither the tasks nor the hypervisor; and the
// allocation's shape is read in one place, the environment's factory.

const module = "github.com/gpuaas/gpuaas"

// shapeFiles are the only files of hostd that may name the shape
// constants (api.ShapeGPUSlice, api.ShapeBaremetal), each with why.
var shapeFiles = map[string]string{
	// Where an allocation's processes run: the one factory.
	"hostd/env/factory.go": "Factory.Open picks the posix or the VM environment",
	// The node's hardware layout, not where processes run: slots and
	// host prerequisites are the node's, discovered by shape.
	"hostd/topology/topology.go": "validates topology.Options.Shape",
	"hostd/topology/slots.go":    "a slice node splits its GPUs into VM slots",
	"hostd/topology/system.go":   "a slice node's prerequisites (IOMMU, VFIO)",
	"hostd/tasks/gpucheck.go":    "the pre-handout GPU check discovers the node as bare metal",
	"hostd/tasks/healthprobe.go": "the guest health probe discovers a VM's topology",
	"hostd/tasks/vmhost.go":      "a slice node's start-up blockers (network, nft) belong to its slice topology",
	// The sim builds nodes of a shape, as an operator installs one.
	"hostd/sim/profiles.go": "sim node profiles are of a shape",
	"hostd/sim/host.go":     "a sim host of a shape gets a hypervisor or users",
}

// parsedFile is one non-test Go file of the module.
type parsedFile struct {
	rel string // slash path from the module root
	f   *ast.File
}

func parseHostd(t *testing.T) (files []parsedFile, imports map[string][]string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	imports = map[string][]string{} // package path → module packages it imports
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		pkg := module + "/" + filepath.ToSlash(filepath.Dir(rel))
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(p, module+"/") && !slices.Contains(imports[pkg], p) {
				imports[pkg] = append(imports[pkg], p)
			}
		}
		if strings.HasPrefix(rel, "hostd/") {
			full, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files = append(files, parsedFile{rel: rel, f: full})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, imports
}

// TestTermReachesNoTasksNorHypervisor: no package of hostd/term imports
// hostd/tasks or hostd/libvirt, directly or through another package of
// the module.
func TestTermReachesNoTasksNorHypervisor(t *testing.T) {
	_, imports := parseHostd(t)
	forbidden := []string{module + "/hostd/tasks", module + "/hostd/libvirt"}
	var terms []string
	for pkg := range imports {
		if pkg == module+"/hostd/term" || strings.HasPrefix(pkg, module+"/hostd/term/") {
			terms = append(terms, pkg)
		}
	}
	if len(terms) == 0 {
		t.Fatal("no hostd/term package found: the test reads the wrong tree")
	}
	for _, start := range terms {
		// Breadth-first, keeping how each package was reached.
		from := map[string]string{start: ""}
		queue := []string{start}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if slices.Contains(forbidden, p) {
				chain := []string{p}
				for q := from[p]; q != ""; q = from[q] {
					chain = append([]string{q}, chain...)
				}
				t.Errorf("%s reaches %s: %s", start, p, strings.Join(chain, " → "))
				continue
			}
			for _, next := range imports[p] {
				if _, seen := from[next]; !seen {
					from[next] = p
					queue = append(queue, next)
				}
			}
		}
	}
}

// TestShapeReadOnlyInTheFactory: the shape constants appear in hostd's
// code only in the files of shapeFiles.
func TestShapeReadOnlyInTheFactory(t *testing.T) {
	files, _ := parseHostd(t)
	seen := map[string]bool{}
	for _, pf := range files {
		apiName := ""
		for _, im := range pf.f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == module+"/internal/api" {
				apiName = "api"
				if im.Name != nil {
					apiName = im.Name.Name
				}
			}
		}
		if apiName == "" {
			continue
		}
		ast.Inspect(pf.f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || x.Name != apiName || (sel.Sel.Name != "ShapeGPUSlice" && sel.Sel.Name != "ShapeBaremetal") {
				return true
			}
			seen[pf.rel] = true
			if _, ok := shapeFiles[pf.rel]; !ok {
				t.Errorf("%s names api.%s: the allocation's shape is read in hostd/env/factory.go (env.Factory.Open) only; use the environment", pf.rel, sel.Sel.Name)
			}
			return true
		})
	}
	if !seen["hostd/env/factory.go"] {
		t.Error("hostd/env/factory.go names no shape: the test no longer sees the factory")
	}
	for f := range shapeFiles {
		if !seen[f] {
			t.Errorf("%s is allowed to name the shape but does not: remove it from shapeFiles", f)
		}
	}
}
