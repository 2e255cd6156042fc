package cli

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The house's layout (docs/architecture.md, "Rooms"): every folder
// under cli/ is a command noun, and the libraries the commands share live
// under internal/, so that the gateway (sshgate) and the dashboard (tui)
// can use them without reaching up into the command tree; cli/cmdutil (the
// factory, output and exit codes) is the one exception, and it dials
// nothing (cli.NewFactory does, through internal/clientconn).

// TestGatewayAndDashboardImportNoCLI: no package of sshgate/ or tui/
// imports a cli/ package, directly or through another package of ours.
func TestGatewayAndDashboardImportNoCLI(t *testing.T) {
	h := readHouse(t)
	for _, root := range []string{"sshgate", "tui"} {
		for _, pkg := range h.pkgsIn(root) {
			if chain := h.reaches(pkg, func(p string) bool { return under(p, h.module+"/cli") }); chain != nil {
				t.Errorf("%s imports a cli/ package: %s", h.rel(pkg), h.describe(chain))
			}
		}
	}
}

// TestEveryCLIFolderIsACommand: each package under cli/ other than
// cli/cmdutil (and its cmdtest) builds a cobra command (a NewCmd* func
// returning *cobra.Command) and is part of the tree package cli builds; a
// library there belongs under internal/.
func TestEveryCLIFolderIsACommand(t *testing.T) {
	h := readHouse(t)
	cli := h.module + "/cli"
	for _, pkg := range h.pkgsIn("cli") {
		if pkg == cli || under(pkg, cli+"/cmdutil") {
			continue
		}
		if !h.pkgs[pkg].newCmd {
			t.Errorf("%s builds no cobra command (no NewCmd* func returning *cobra.Command): a library belongs under internal/", h.rel(pkg))
		}
		if h.reaches(cli, func(p string) bool { return p == pkg }) == nil {
			t.Errorf("%s is not part of the command tree: package cli does not import it", h.rel(pkg))
		}
	}
}

// TestCmdutilDialsNothing: the package every verb imports stays a leaf
// that dials nothing: cmdutil reaches neither internal/bus nor
// internal/clientconn.
func TestCmdutilDialsNothing(t *testing.T) {
	h := readHouse(t)
	for _, dialer := range []string{"/internal/bus", "/internal/clientconn"} {
		if chain := h.reaches(h.module+"/cli/cmdutil", func(p string) bool { return p == h.module+dialer }); chain != nil {
			t.Errorf("cli/cmdutil reaches %s: %s", dialer[1:], h.describe(chain))
		}
	}
}

// house is the module's packages as their non-test files import them.
type house struct {
	module, root string
	pkgs         map[string]*pkgInfo // by import path
}

type pkgInfo struct {
	imports []string
	newCmd  bool // declares a NewCmd* func returning *cobra.Command
}

// readHouse parses the imports of every package of the module (build tags
// are not applied: a file behind any tag counts).
func readHouse(t *testing.T) *house {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	h := &house{module: modulePath(t, filepath.Join(root, "go.mod")), root: root, pkgs: map[string]*pkgInfo{}}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := h.module
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		info := h.pkgs[pkg]
		if info == nil {
			info = &pkgInfo{}
			h.pkgs[pkg] = info
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(info.imports, p) {
				info.imports = append(info.imports, p)
			}
		}
		info.newCmd = info.newCmd || declaresNewCmd(f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// declaresNewCmd reports whether f declares a func NewCmd* returning
// *cobra.Command.
func declaresNewCmd(f *ast.File) bool {
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "NewCmd") || fn.Type.Results == nil {
			continue
		}
		for _, r := range fn.Type.Results.List {
			if star, ok := r.Type.(*ast.StarExpr); ok {
				if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Command" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "cobra" {
						return true
					}
				}
			}
		}
	}
	return false
}

func modulePath(t *testing.T, gomod string) string {
	t.Helper()
	f, err := os.Open(gomod)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.TrimSpace(m)
		}
	}
	t.Fatalf("no module line in %s", gomod)
	return ""
}

// under reports whether import path p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// pkgsIn returns the module's packages in folder dir (relative to the
// module's root) and below it, sorted.
func (h *house) pkgsIn(dir string) []string {
	var out []string
	for p := range h.pkgs {
		if under(p, h.module+"/"+dir) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// reaches returns the shortest import chain from package from to a package
// of the module that match accepts (from itself excluded), or nil.
func (h *house) reaches(from string, match func(string) bool) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		info := h.pkgs[p]
		if info == nil {
			continue
		}
		for _, imp := range info.imports {
			if _, seen := prev[imp]; seen || !under(imp, h.module) {
				continue
			}
			prev[imp] = p
			if match(imp) {
				chain := []string{imp}
				for q := p; q != ""; q = prev[q] {
					chain = append([]string{q}, chain...)
				}
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

func (h *house) rel(p string) string {
	if r, ok := strings.CutPrefix(p, h.module+"/"); ok {
		return r
	}
	return p
}

func (h *house) describe(chain []string) string {
	out := make([]string, len(chain))
	for i, p := range chain {
		out[i] = h.rel(p)
	}
	return strings.Join(out, " -> ")
}
