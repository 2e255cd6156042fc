package hostproto

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

// sendMethods send a message on NATS (nats.Conn, api.Client's raw
// Request) or build one.
var sendMethods = map[string]bool{"Request": true, "RequestMsg": true, "RequestWithContext": true,
	"RequestMsgWithContext": true, "Publish": true, "PublishMsg": true, "PublishRequest": true, "NewMsg": true}

// ownSubjects are the files outside this package that may spell a subject
// below gpuaas.host. or gpuaas.ctl.: the NATS server's own permissions,
// and the job-log stream (docs/decisions/0022-logs-in-jetstream.md), which
// is a JetStream stream and not a host-protocol message.
var ownSubjects = map[string]bool{
	filepath.Join("internal", "bus", "keys.go"):            true,
	filepath.Join("internal", "logstream", "logstream.go"): true,
}

// TestNoHostMessageBypassesDescriptors: controld and hostd reach each
// other only through a Msg… declaration and this package's Request,
// RequestSealed, Publish, Ask and Deliver, so the request and response
// types are the declared ones (docs/decisions/0065-one-wire-package-per-
// protocol.md). It walks the module's non-test Go files outside this
// package and fails on a NATS send to a host subject (a Message's
// SubjectOf or Wildcard, SubjectEnroll) and on a subject literal below
// gpuaas.host. or gpuaas.ctl.; subscribing to SubjectOf (hostd's
// receivers) is allowed.
func TestNoHostMessageBypassesDescriptors(t *testing.T) {
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
		rel, _ := filepath.Rel(root, path)
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			filepath.Dir(rel) == filepath.Join("internal", "hostproto") {
			return nil
		}
		scanned++
		found = append(found, hostBypasses(t, rel, path)...)
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

// hostBypasses lists the sends to host subjects in one file that go
// around this package.
func hostBypasses(t *testing.T, rel, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(x.Value); err == nil && !ownSubjects[rel] &&
				(strings.HasPrefix(s, "gpuaas.host.") || strings.HasPrefix(s, "gpuaas.ctl.")) {
				out = append(out, rel+":"+strconv.Itoa(fset.Position(x.Pos()).Line)+": host subject "+strconv.Quote(s)+
					" spelled out; use a hostproto.Msg… declaration")
			}
		case *ast.CallExpr:
			sel, ok := x.Fun.(*ast.SelectorExpr)
			if !ok || !sendMethods[sel.Sel.Name] {
				return true
			}
			for _, a := range x.Args {
				if hostSubject(a) {
					out = append(out, rel+":"+strconv.Itoa(fset.Position(x.Pos()).Line)+": "+sel.Sel.Name+
						" to a host subject; send with hostproto.Request, RequestSealed, Publish, Ask or Deliver")
				}
			}
		}
		return true
	})
	return out
}

// hostSubject reports whether e names a subject of the host protocol.
func hostSubject(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if x.Sel.Name == "SubjectOf" || x.Sel.Name == "Wildcard" || x.Sel.Name == "SubjectEnroll" {
				found = true
			}
		}
		return !found
	})
	return found
}

// TestMessagesAreDeclaredOnce: every message has a sender, a subject and
// a name of its own; reports are sealed and carry their kind; what
// controld sends is a node's to receive.
func TestMessagesAreDeclaredOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Messages() {
		if seen[s.subject("n-1")] {
			t.Errorf("%s: subject %s declared twice", s.Name, s.subject("n-1"))
		}
		seen[s.subject("n-1")] = true
		switch {
		case s.From == Hostd && s.Kind != "" && (!s.Sealed || s.subject("n-1") != hostCtlSubject("n-1", s.Kind)):
			t.Errorf("%s: a report must be sealed and sent on its kind's subject", s.Name)
		case s.From == Controld && !strings.HasPrefix(s.subject("n-1"), "gpuaas.host.n-1."):
			t.Errorf("%s: controld's messages go to gpuaas.host.<node>.", s.Name)
		case s.Published && s.Replay:
			t.Errorf("%s: a published report is single-use", s.Name)
		}
	}
	if len(seen) != 10 {
		t.Errorf("%d messages declared; want 10", len(seen))
	}
}
