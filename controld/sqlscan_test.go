package controld_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// tableUse is one statement's use of a table, found in a Go source file.
type tableUse struct {
	pkg   string // controld's package, by directory ("controld" for the root)
	table string
	write bool // INSERT, UPDATE, DELETE, TRUNCATE or COPY; else FROM or JOIN
	pos   string
}

var (
	// writeRE finds the statements that change a table.
	writeRE = regexp.MustCompile(`(?is)\b(insert\s+into|update|delete\s+from|truncate(?:\s+table)?|copy)\s+(?:only\s+)?(?:public\.)?"?([a-z_][a-z0-9_]*)"?`)
	// readRE finds the tables a statement reads.
	readRE = regexp.MustCompile(`(?is)\b(from|join)\s+(?:only\s+)?(?:public\.)?"?([a-z_][a-z0-9_]*)"?`)
	// clauseWords precede UPDATE or DELETE when they are not statements:
	// FOR [NO KEY] UPDATE, ON CONFLICT DO UPDATE, ON DELETE CASCADE,
	// triggers' BEFORE UPDATE OR DELETE.
	clauseWords = []string{"for", "key", "do", "on", "or", "before", "after", "instead", "of"}
	lastWordRE  = regexp.MustCompile(`(?i)([a-z]+)\s*$`)
	// proseCalls take messages, not SQL: their string arguments are skipped.
	proseCalls = []string{"Errorf", "New", "WithHint", "Debug", "Info", "Warn", "Error", "Fatal", "Fatalf", "Logf"}
)

// scanSQL finds every use of a table in text (SQL from one string
// expression); tables are the names the schema defines.
func scanSQL(text string, tables map[string]bool) (writes, reads []string) {
	for _, m := range writeRE.FindAllStringSubmatchIndex(text, -1) {
		verb := strings.ToLower(text[m[2]:m[3]])
		table := strings.ToLower(text[m[4]:m[5]])
		if (verb == "update" || strings.HasPrefix(verb, "delete")) && isClause(text[:m[2]]) {
			continue
		}
		if tables[table] {
			writes = append(writes, table)
		}
	}
	for _, m := range readRE.FindAllStringSubmatch(text, -1) {
		if table := strings.ToLower(m[2]); tables[table] {
			reads = append(reads, table)
		}
	}
	return writes, reads
}

func isClause(before string) bool {
	m := lastWordRE.FindStringSubmatch(before)
	return m != nil && slices.Contains(clauseWords, strings.ToLower(m[1]))
}

// scanPackages parses the non-test Go files under root (controld) and
// returns every use of a table their string literals make. A chain of
// literals joined with + is read as one statement (what is not a literal
// reads as a space); pgx.Identifier{"t"} (CopyFrom's table) is a write.
func scanPackages(t *testing.T, root string, tables map[string]bool) []tableUse {
	t.Helper()
	var uses []tableUse
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if pkg == "." {
			pkg = "controld"
		}
		uses = append(uses, scanFile(fset, f, pkg, tables)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return uses
}

func scanFile(fset *token.FileSet, f *ast.File, pkg string, tables map[string]bool) []tableUse {
	var uses []tableUse
	add := func(pos token.Pos, text string, identifier bool) {
		writes, reads := scanSQL(text, tables)
		if identifier && tables[text] {
			writes = append(writes, text)
		}
		p := fset.Position(pos)
		where := filepath.ToSlash(p.Filename) + ":" + strconv.Itoa(p.Line)
		for _, tb := range writes {
			uses = append(uses, tableUse{pkg: pkg, table: tb, write: true, pos: where})
		}
		for _, tb := range reads {
			uses = append(uses, tableUse{pkg: pkg, table: tb, pos: where})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ImportSpec, *ast.Field:
			return false // import paths, struct tags
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && slices.Contains(proseCalls, sel.Sel.Name) {
				return false
			}
		case *ast.CompositeLit:
			if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Identifier" {
				for _, e := range n.Elts {
					if s, ok := literal(e); ok {
						add(e.Pos(), s, true)
					}
				}
				return false
			}
		case *ast.BinaryExpr:
			if n.Op == token.ADD {
				if text, ok := concat(n); ok {
					add(n.Pos(), text, false)
					return false
				}
			}
		case *ast.BasicLit:
			if s, ok := literal(n); ok {
				add(n.Pos(), s, false)
			}
		}
		return true
	})
	return uses
}

// concat flattens a + chain holding at least one string literal.
func concat(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return " ", false
		}
		l, lok := concat(e.X)
		r, rok := concat(e.Y)
		return l + r, lok || rok
	case *ast.ParenExpr:
		return concat(e.X)
	default:
		if s, ok := literal(e); ok {
			return s, true
		}
		return " ", false
	}
}

func literal(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

var (
	createTableRE = regexp.MustCompile(`(?i)\bcreate\s+(?:unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?(?:public\.)?"?([a-z_][a-z0-9_]*)"?`)
	dropTableRE   = regexp.MustCompile(`(?i)\bdrop\s+table\s+(?:if\s+exists\s+)?(?:public\.)?"?([a-z_][a-z0-9_]*)"?`)
	renameTableRE = regexp.MustCompile(`(?i)\balter\s+table\s+(?:if\s+exists\s+)?(?:public\.)?"?([a-z_][a-z0-9_]*)"?\s+rename\s+to\s+"?([a-z_][a-z0-9_]*)"?`)
	sqlCommentRE  = regexp.MustCompile(`--[^\n]*`)
)

// schemaTables returns the tables the migrations in dir leave behind, in
// migration order.
func schemaTables(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]bool{}
	for _, e := range entries { // ReadDir sorts by name: NNNN_ order
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sql := sqlCommentRE.ReplaceAllString(string(b), "")
		for _, m := range createTableRE.FindAllStringSubmatch(sql, -1) {
			tables[strings.ToLower(m[1])] = true
		}
		for _, m := range renameTableRE.FindAllStringSubmatch(sql, -1) {
			delete(tables, strings.ToLower(m[1]))
			tables[strings.ToLower(m[2])] = true
		}
		for _, m := range dropTableRE.FindAllStringSubmatch(sql, -1) {
			delete(tables, strings.ToLower(m[1]))
		}
	}
	if len(tables) == 0 {
		t.Fatalf("no CREATE TABLE in %s", dir)
	}
	return tables
}
