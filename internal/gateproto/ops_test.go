package gateproto

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestGatewayEndpointsLiveHere: every Endpoint… name constant of this
// package has its descriptor, and every gateway-only descriptor (and every
// gate.* one) is declared here, not in internal/api
// (docs/decisions/0065-one-wire-package-per-protocol.md).
func TestGatewayEndpointsLiveHere(t *testing.T) {
	names := endpointConstants(t)
	if len(names) == 0 {
		t.Fatal("found no Endpoint… constants")
	}
	for v, c := range names {
		if _, ok := api.Lookup(v); !ok {
			t.Errorf("%s (%q) has no descriptor: declare it with api.NewQuery/NewMutation in ops.go", c, v)
		}
	}
	for _, s := range api.Endpoints() {
		if s.Access != api.GatewayOnly && !strings.HasPrefix(s.Name, "gate.") {
			continue
		}
		if _, ok := names[s.Name]; !ok {
			t.Errorf("gateway endpoint %s is not declared in internal/gateproto", s.Name)
		}
	}
}

// TestGateLoginIsNeverReplayed: gate.login's reply is a token controld
// does not keep, so a retry is sent only when no replica received it.
func TestGateLoginIsNeverReplayed(t *testing.T) {
	if s := OpGateLogin.Spec(); s.Kind != api.SecretMutation || s.Replayable() || !api.Unreplayable(s.Name) {
		t.Errorf("%s: kind %s, replayable %v; want a secret mutation, never replayed", s.Name, s.Kind, s.Replayable())
	}
}

// endpointConstants maps each Endpoint… constant's value to its name.
func endpointConstants(t *testing.T) map[string]string {
	t.Helper()
	names := map[string]string{}
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
	return names
}
