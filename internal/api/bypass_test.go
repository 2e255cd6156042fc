package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// requestMethods send a message on NATS (nats.Conn, micro) or build one.
var requestMethods = map[string]bool{"Request": true, "RequestMsg": true, "RequestWithContext": true,
	"RequestMsgWithContext": true, "Publish": true, "PublishMsg": true, "PublishRequest": true, "NewMsg": true}

// TestNoAPIRequestBypassesDescriptors: client code reaches the user API
// only through Do and an endpoint's declaration, so the request and
// response types, the Idempotency-Key and the retry policy are the
// declared ones (docs/decisions/0013-endpoint-descriptors.md). It walks
// the module's non-test Go files and fails on: a Client.Call or
// Client.Mutate (raw calls by name, kept for tests that send what the
// types cannot) outside client.go; in this package, a send (c.call, c.do)
// outside client.go and endpoint.go; anywhere, a NATS request or publish
// to an API subject (api.Subject, Spec.Subject, a "gpuaas.api.v1."
// literal).
func TestNoAPIRequestBypassesDescriptors(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	scanned := 0
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
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		scanned++
		found = append(found, bypasses(t, rel, path)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("scanned %d files under %s; the walk is broken", scanned, root)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// bypasses lists the calls in one file that reach the API around Do.
func bypasses(t *testing.T, rel, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	inAPI := filepath.Dir(rel) == filepath.Join("internal", "api")
	base := filepath.Base(rel)
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		at := fset.Position(call.Pos())
		where := rel + ":" + strconv.Itoa(at.Line)
		switch m := sel.Sel.Name; {
		case (m == "Call" || m == "Mutate") && len(call.Args) >= 4 && !(inAPI && base == "client.go"):
			out = append(out, where+": "+m+" sends a request by name; call api.Do with the endpoint's descriptor")
		case inAPI && (m == "call" || m == "do") && base != "client.go" && base != "endpoint.go":
			out = append(out, where+": "+m+" sends around Do")
		case requestMethods[m]:
			for _, a := range call.Args {
				if apiSubject(a) {
					out = append(out, where+": "+m+" to an API subject; call api.Do with the endpoint's descriptor")
				}
			}
		}
		return true
	})
	return out
}

// apiSubject reports whether e names a subject of the user API.
func apiSubject(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(x.Value); err == nil && strings.HasPrefix(s, SubjectPrefix+".") {
				found = true
			}
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "Subject" {
				found = true // inside this package
			}
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Subject" {
				if id, ok := sel.X.(*ast.Ident); !ok || id.Name == "api" {
					found = true // api.Subject(…), spec.Subject()
				}
			}
		case *ast.Ident:
			if x.Name == "SubjectPrefix" {
				found = true // inside this package
			}
		}
		return !found
	})
	return found
}
