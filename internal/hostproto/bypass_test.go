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

// subscribeMethods subscribe to a NATS subject (nats.Conn's): on a host
// subject only this package's Subscribe, SubscribeSealed, Serve,
// ServeSealed and Deliver may call them.
var subscribeMethods = map[string]bool{"Subscribe": true, "SubscribeSync": true, "QueueSubscribe": true,
	"QueueSubscribeSync": true, "ChanSubscribe": true, "ChanQueueSubscribe": true, "QueueSubscribeSyncWithChan": true}

// receivers are the packages that receive host-protocol messages:
// hostd's agent (tasks, logs and telemetry requests from controld) and
// controld's host service (enrollment and node reports from hostd). What
// they receive reaches them decoded as declared (Inbound); they decode no
// message body, open or seal no envelope and answer no request by hand.
var receivers = []string{filepath.Join("hostd", "agent"), filepath.Join("controld", "hosts")}

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
// RequestSealed, Publish, Ask and Deliver, and receive only through
// Subscribe, SubscribeSealed, Serve and ServeSealed, so the request and
// response types are the declared ones (docs/decisions/0065-one-wire-
// package-per-protocol.md). It walks the module's non-test Go files
// outside this package and fails on a NATS send or subscription on a
// host subject (a Message's SubjectOf or Wildcard, SubjectEnroll), on a
// subject literal below gpuaas.host. or gpuaas.ctl., and, in the
// receiving packages (receivers), on a hand decode (receiverBypasses).
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
			if !ok || !(sendMethods[sel.Sel.Name] || subscribeMethods[sel.Sel.Name]) {
				return true
			}
			for _, a := range x.Args {
				switch {
				case !hostSubject(a):
				case subscribeMethods[sel.Sel.Name]:
					out = append(out, rel+":"+strconv.Itoa(fset.Position(x.Pos()).Line)+": "+sel.Sel.Name+
						" on a host subject; receive with hostproto.Subscribe, SubscribeSealed, Serve or ServeSealed")
				default:
					out = append(out, rel+":"+strconv.Itoa(fset.Position(x.Pos()).Line)+": "+sel.Sel.Name+
						" to a host subject; send with hostproto.Request, RequestSealed, Publish, Ask or Deliver")
				}
			}
		}
		return true
	})
	for _, dir := range receivers {
		if filepath.Dir(rel) == dir {
			out = append(out, receiverBypasses(fset, f, rel)...)
		}
	}
	return out
}

// receiverBypasses lists the hand decodes in a file of a receiving
// package: encoding/json reading a NATS message's body (….Data) or an
// envelope's payload (….Payload), or into a value of a host-protocol type
// (hostproto's, signing.Envelope); internal/signing's Open or Seal, which
// take any type (hostproto.Open and Seal take the declared one); and, in
// hostd's agent, a function taking a *nats.Msg or answering one itself
// (Respond), which only a raw subscription hands out.
func receiverBypasses(fset *token.FileSet, f *ast.File, rel string) []string {
	typed := map[string]bool{} // names declared with a host-protocol type
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.ValueSpec:
			if x.Type != nil && protoType(x.Type) {
				for _, name := range x.Names {
					typed[name.Name] = true
				}
			}
		case *ast.Field:
			if protoType(x.Type) {
				for _, name := range x.Names {
					typed[name.Name] = true
				}
			}
		case *ast.AssignStmt:
			for i, r := range x.Rhs {
				if c, ok := r.(*ast.CompositeLit); ok && i < len(x.Lhs) && protoType(c.Type) {
					if id, ok := x.Lhs[i].(*ast.Ident); ok {
						typed[id.Name] = true
					}
				}
			}
		}
		return true
	})
	var out []string
	at := func(n ast.Node, what string) {
		out = append(out, rel+":"+strconv.Itoa(fset.Position(n.Pos()).Line)+": "+what)
	}
	agent := filepath.Dir(rel) == filepath.Join("hostd", "agent")
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncType:
			if agent && x.Params != nil {
				for _, p := range x.Params.List {
					if isSel(p.Type, "nats", "Msg", true) {
						at(x, "a handler of a raw *nats.Msg; receive with hostproto.Subscribe or SubscribeSealed")
					}
				}
			}
		case *ast.CallExpr:
			sel, ok := x.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, _ := sel.X.(*ast.Ident)
			switch {
			case pkg != nil && pkg.Name == "json" && (sel.Sel.Name == "Unmarshal" || sel.Sel.Name == "NewDecoder"):
				if len(x.Args) > 0 && (mentions(x.Args[0], "Data") || mentions(x.Args[0], "Payload")) {
					at(x, "json."+sel.Sel.Name+" of a message body or envelope payload by hand; take it decoded (hostproto.Inbound, Open)")
				}
				if len(x.Args) > 1 && intoTyped(x.Args[1], typed) {
					at(x, "json."+sel.Sel.Name+" into a host-protocol type by hand; take it decoded (hostproto.Inbound, Open)")
				}
			case pkg != nil && pkg.Name == "signing" && (sel.Sel.Name == "Open" || sel.Sel.Name == "Seal"):
				at(x, "signing."+sel.Sel.Name+" takes any type; use hostproto."+sel.Sel.Name+", typed by the message")
			case agent && (sel.Sel.Name == "Respond" || sel.Sel.Name == "RespondMsg"):
				at(x, sel.Sel.Name+" by hand; answer with hostproto.Inbound's Reply")
			}
		}
		return true
	})
	return out
}

// protoType reports whether a type expression names a host-protocol type:
// hostproto's, or internal/signing's Envelope (a sealed body).
func protoType(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && (id.Name == "hostproto" || (id.Name == "signing" && sel.Sel.Name == "Envelope")) {
				found = true
			}
		}
		return !found
	})
	return found
}

// intoTyped reports whether a decode target is (the address of) a name
// declared with a host-protocol type, or of a composite literal of one.
func intoTyped(e ast.Expr, typed map[string]bool) bool {
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = u.X
	}
	switch x := e.(type) {
	case *ast.Ident:
		return typed[x.Name]
	case *ast.CompositeLit:
		return protoType(x.Type)
	case *ast.CallExpr: // new(hostproto.X)
		if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "new" && len(x.Args) == 1 {
			return protoType(x.Args[0])
		}
	}
	return false
}

// isSel reports whether e is pkg.name (or *pkg.name when star).
func isSel(e ast.Expr, pkg, name string, star bool) bool {
	if s, ok := e.(*ast.StarExpr); ok && star {
		e = s.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == name
}

// mentions reports whether e selects a field or method called name.
func mentions(e ast.Expr, name string) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == name {
			found = true
		}
		return !found
	})
	return found
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
