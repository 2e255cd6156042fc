package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestCheckSpecRefusesIncompleteDeclarations(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string // "" for accepted
	}{
		{name: "complete", spec: Spec{Name: "alloc.get", Access: LoggedIn, Kind: Query}},
		{name: "no access level", spec: Spec{Name: "alloc.get", Kind: Query}, want: "no access level"},
		{name: "unknown access level", spec: Spec{Name: "alloc.get", Access: Access(99), Kind: Query}, want: "no access level"},
		{name: "no kind", spec: Spec{Name: "alloc.get", Access: LoggedIn}, want: "no kind"},
		{name: "no name", spec: Spec{Access: LoggedIn, Kind: Query}, want: "not <noun>.<verb>"},
		{name: "a subject, not a name", spec: Spec{Name: "gpuaas.api.v1.alloc.get", Access: LoggedIn, Kind: Query}, want: "not <noun>.<verb>"},
		{name: "wildcard", spec: Spec{Name: "alloc.>", Access: LoggedIn, Kind: Query}, want: "not <noun>.<verb>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSpec(tt.spec)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v; want accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v; want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestDeclaringAnEndpointTwicePanics(t *testing.T) {
	NewQuery[Empty, Empty]("test.declared_twice", Public)
	defer func() {
		if recover() == nil {
			t.Error("a second declaration of test.declared_twice did not panic")
		}
	}()
	NewMutation[Empty, Empty]("test.declared_twice", AdminOnly)
}

func TestDeclarationsDecideRetries(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want retryPolicy
	}{
		{name: "read", spec: OpAllocGet.Spec(), want: retryAlways},
		{name: "mutation", spec: OpAllocCreate.Spec(), want: retryAlways},
		{name: "login", spec: OpAuthLogin.Spec(), want: retryUndelivered},
		{name: "enrollment token", spec: OpNodeEnroll.Spec(), want: retryUndelivered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.retry(); got != tt.want {
				t.Errorf("%s: got policy %d; want %d", tt.spec.Name, got, tt.want)
			}
			if got := policyOf(tt.spec.Name); got != tt.want {
				t.Errorf("policyOf(%s) = %d; want %d", tt.spec.Name, got, tt.want)
			}
			if got, want := Unreplayable(tt.spec.Name), tt.want == retryUndelivered; got != want {
				t.Errorf("Unreplayable(%s) = %v; want %v", tt.spec.Name, got, want)
			}
		})
	}
}

// TestEveryEndpointNameIsDeclared: every Endpoint… name constant of this
// package has its descriptor (an Op… variable), and every descriptor's
// name is one of them.
func TestEveryEndpointNameIsDeclared(t *testing.T) {
	names := map[string]string{} // value → constant
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Endpoint") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						names[v] = n.Name
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("found no Endpoint… constants")
	}
	for v, c := range names {
		if _, ok := Lookup(v); !ok {
			t.Errorf("%s (%q) has no descriptor: declare it with NewQuery/NewMutation in ops_*.go", c, v)
		}
	}
	for _, s := range Endpoints() {
		if _, ok := names[s.Name]; !ok && !strings.HasPrefix(s.Name, "test.") {
			t.Errorf("descriptor %s has no Endpoint… name constant", s.Name)
		}
	}
}
