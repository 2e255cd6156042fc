package controld

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// requestTypes are the bodies handlers decode with call.decode, by the
// name of their type; TestRequestTypesCoverDecodes keeps the table in
// step with the handlers.
var requestTypes = map[string]func() any{
	"api.VolumePriceSetRequest":          func() any { return new(api.VolumePriceSetRequest) },
	"api.AppPriceSetRequest":             func() any { return new(api.AppPriceSetRequest) },
	"api.AppPriceListRequest":            func() any { return new(api.AppPriceListRequest) },
	"gateproto.GateVolumeEndRequest":     func() any { return new(gateproto.GateVolumeEndRequest) },
	"api.AppLogsRequest":                 func() any { return new(api.AppLogsRequest) },
	"api.SecretListRequest":              func() any { return new(api.SecretListRequest) },
	"api.SecretRemoveRequest":            func() any { return new(api.SecretRemoveRequest) },
	"api.SecretSetRequest":               func() any { return new(api.SecretSetRequest) },
	"api.ExposeCreateRequest":            func() any { return new(api.ExposeCreateRequest) },
	"api.ExposeListRequest":              func() any { return new(api.ExposeListRequest) },
	"api.ExposeRemoveRequest":            func() any { return new(api.ExposeRemoveRequest) },
	"gateproto.GateAuthorizeHTTPRequest": func() any { return new(gateproto.GateAuthorizeHTTPRequest) },
	"api.JobLogsRequest":                 func() any { return new(api.JobLogsRequest) },
	"api.ImageChangeRequest":             func() any { return new(api.ImageChangeRequest) },
	"api.ImageListRequest":               func() any { return new(api.ImageListRequest) },
	"api.ImagePublishRequest":            func() any { return new(api.ImagePublishRequest) },
	"api.ImageRef":                       func() any { return new(api.ImageRef) },
	"api.AppPublishRequest":              func() any { return new(api.AppPublishRequest) },
	"api.AppListRequest":                 func() any { return new(api.AppListRequest) },
	"api.AppRef":                         func() any { return new(api.AppRef) },
	"api.JobCreateRequest":               func() any { return new(api.JobCreateRequest) },
	"api.JobListRequest":                 func() any { return new(api.JobListRequest) },
	"api.JobRef":                         func() any { return new(api.JobRef) },
	"api.AppRunRequest":                  func() any { return new(api.AppRunRequest) },
	"api.AppPsRequest":                   func() any { return new(api.AppPsRequest) },
	"api.WorkloadRef":                    func() any { return new(api.WorkloadRef) },
	"api.VolumeCreateRequest":            func() any { return new(api.VolumeCreateRequest) },
	"api.VolumeListRequest":              func() any { return new(api.VolumeListRequest) },
	"api.VolumeRef":                      func() any { return new(api.VolumeRef) },
	"api.VolumeResizeRequest":            func() any { return new(api.VolumeResizeRequest) },
	"api.VolumeAttachRequest":            func() any { return new(api.VolumeAttachRequest) },
	"api.VolumeDetachRequest":            func() any { return new(api.VolumeDetachRequest) },
	"api.WebhookAddRequest":              func() any { return new(api.WebhookAddRequest) },
	"api.WebhookDeliveriesRequest":       func() any { return new(api.WebhookDeliveriesRequest) },
	"api.WebhookDeliveryRef":             func() any { return new(api.WebhookDeliveryRef) },
	"api.WebhookListRequest":             func() any { return new(api.WebhookListRequest) },
	"api.WebhookRef":                     func() any { return new(api.WebhookRef) },
	// Exposures (docs/expose.md).
	"api.ExposeLinkRequest":             func() any { return new(api.ExposeLinkRequest) },
	"gateproto.GateRedeemLinkRequest":   func() any { return new(gateproto.GateRedeemLinkRequest) },
	"api.AddMemberRequest":              func() any { return new(api.AddMemberRequest) },
	"api.AllocCreateRequest":            func() any { return new(api.AllocCreateRequest) },
	"api.AllocListRequest":              func() any { return new(api.AllocListRequest) },
	"api.AllocRef":                      func() any { return new(api.AllocRef) },
	"api.AuditListRequest":              func() any { return new(api.AuditListRequest) },
	"api.TokenCreateRequest":            func() any { return new(api.TokenCreateRequest) },
	"api.TokenListRequest":              func() any { return new(api.TokenListRequest) },
	"api.TokenRevokeRequest":            func() any { return new(api.TokenRevokeRequest) },
	"api.AllocReleaseRequest":           func() any { return new(api.AllocReleaseRequest) },
	"api.BillingLedgerRequest":          func() any { return new(api.BillingLedgerRequest) },
	"api.BillingRequest":                func() any { return new(api.BillingRequest) },
	"api.BillingUsageRequest":           func() any { return new(api.BillingUsageRequest) },
	"api.BudgetClearRequest":            func() any { return new(api.BudgetClearRequest) },
	"api.BudgetSetRequest":              func() any { return new(api.BudgetSetRequest) },
	"api.BusIdentityAddRequest":         func() any { return new(api.BusIdentityAddRequest) },
	"api.BusIdentityRevokeRequest":      func() any { return new(api.BusIdentityRevokeRequest) },
	"api.CAListRequest":                 func() any { return new(api.CAListRequest) },
	"api.CARotateRequest":               func() any { return new(api.CARotateRequest) },
	"api.CreditRequest":                 func() any { return new(api.CreditRequest) },
	"api.EnrollTokenRequest":            func() any { return new(api.EnrollTokenRequest) },
	"api.EventsSinceRequest":            func() any { return new(api.EventsSinceRequest) },
	"api.ExchangeRequest":               func() any { return new(api.ExchangeRequest) },
	"gateproto.GateActivityRequest":     func() any { return new(gateproto.GateActivityRequest) },
	"gateproto.GateAuthorizeRequest":    func() any { return new(gateproto.GateAuthorizeRequest) },
	"gateproto.GateCredentialsRequest":  func() any { return new(gateproto.GateCredentialsRequest) },
	"gateproto.GateHostCertRequest":     func() any { return new(gateproto.GateHostCertRequest) },
	"gateproto.GateLoginRequest":        func() any { return new(gateproto.GateLoginRequest) },
	"gateproto.GateSessionsRequest":     func() any { return new(gateproto.GateSessionsRequest) },
	"gateproto.GateUserTokenRequest":    func() any { return new(gateproto.GateUserTokenRequest) },
	"api.LoginRequest":                  func() any { return new(api.LoginRequest) },
	"api.NodeClearRequest":              func() any { return new(api.NodeClearRequest) },
	"api.NodeLogsRequest":               func() any { return new(api.NodeLogsRequest) },
	"api.NodeQuarantineRequest":         func() any { return new(api.NodeQuarantineRequest) },
	"api.NodeRef":                       func() any { return new(api.NodeRef) },
	"api.OutboxListRequest":             func() any { return new(api.OutboxListRequest) },
	"api.OutboxRef":                     func() any { return new(api.OutboxRef) },
	"api.ProjectCreateRequest":          func() any { return new(api.ProjectCreateRequest) },
	"api.ProjectPolicyRequest":          func() any { return new(api.ProjectPolicyRequest) },
	"api.ProjectRef":                    func() any { return new(api.ProjectRef) },
	"api.ProjectUseRequest":             func() any { return new(api.ProjectUseRequest) },
	"api.RecordingRequest":              func() any { return new(api.RecordingRequest) },
	"api.RefundRequest":                 func() any { return new(api.RefundRequest) },
	"api.SSHCertRequest":                func() any { return new(api.SSHCertRequest) },
	"gateproto.SessionEndRequest":       func() any { return new(gateproto.SessionEndRequest) },
	"gateproto.SessionInterruptRequest": func() any { return new(gateproto.SessionInterruptRequest) },
	"api.SessionListRequest":            func() any { return new(api.SessionListRequest) },
	"api.SessionRef":                    func() any { return new(api.SessionRef) },
	"gateproto.SessionStartRequest":     func() any { return new(gateproto.SessionStartRequest) },
	"api.SlotsApproveRequest":           func() any { return new(api.SlotsApproveRequest) },
	"api.TopupRequest":                  func() any { return new(api.TopupRequest) },
	"api.UserAddRequest":                func() any { return new(api.UserAddRequest) },
	"api.UserLinkRequest":               func() any { return new(api.UserLinkRequest) },
	"api.UserRef":                       func() any { return new(api.UserRef) },
}

// requestTypeNames is requestTypes' keys in a fixed order, for the fuzz
// input's kind byte.
func requestTypeNames() []string { return slices.Sorted(maps.Keys(requestTypes)) }

// fuzzRequest is a micro.Request with a body and nothing else.
type fuzzRequest struct {
	micro.Request
	data []byte
}

func (r fuzzRequest) Data() []byte { return r.data }

// FuzzDecodeRequest feeds call.decode request bodies for every request
// type a handler decodes. Properties: a refused body is an
// invalid_argument error; an accepted body is one JSON value (nothing
// after it) and, decoded, encodes to a body that decodes to the same
// request and the same encoding.
func FuzzDecodeRequest(f *testing.F) {
	names := requestTypeNames()
	for i, n := range names {
		b, err := json.Marshal(requestTypes[n]())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	f.Add(uint8(0), []byte(" "))
	f.Add(uint8(1), []byte(`{"sku":"h100","gpus":8,"queue":true,"idle_release_after":"30m"}`))
	f.Add(uint8(1), []byte(`{"sku":"h100","gpus":1,"admin":true}`))
	f.Add(uint8(2), []byte(`null`))
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		name := names[int(kind)%len(names)]
		v := requestTypes[name]()
		c := &call{req: fuzzRequest{data: body}}
		err := c.decode(v)
		if err != nil {
			var apiErr *api.Error
			if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalidArgument {
				t.Fatalf("%s: error %v is not invalid_argument", name, err)
			}
			return
		}
		if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && !json.Valid(trimmed) {
			t.Fatalf("%s: accepted %q, which is not one JSON value", name, body)
		}
		enc, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: decoded request does not encode: %v", name, err)
		}
		back := requestTypes[name]()
		if err := (&call{req: fuzzRequest{data: enc}}).decode(back); err != nil {
			t.Fatalf("%s: re-encoded %s refused: %v", name, enc, err)
		}
		if !reflect.DeepEqual(v, back) {
			t.Fatalf("%s round trip: got %+v; want %+v", name, back, v)
		}
		if enc2, _ := json.Marshal(back); !bytes.Equal(enc, enc2) {
			t.Fatalf("%s: encodings differ: %s and %s", name, enc, enc2)
		}
	})
}

// TestRequestTypesCoverDecodes checks that every request body controld
// decodes is in requestTypes, so a new endpoint's body is fuzzed without
// anyone remembering to add it: the request type of every declared
// endpoint (api.Endpoints: query and mutation decode it before the
// handler, register.go), and of every c.decode(&x) left in the handlers;
// and that requestTypes names nothing else.
func TestRequestTypesCoverDecodes(t *testing.T) {
	covered := map[string]bool{}
	for _, spec := range api.Endpoints() {
		if spec.Request == reflect.TypeFor[api.Empty]() {
			continue // read from no body
		}
		typ := "api." + spec.Request.Name()
		if spec.Request.PkgPath() != reflect.TypeFor[api.Empty]().PkgPath() {
			typ = spec.Request.String()
		}
		covered[typ] = true
		if _, known := requestTypes[typ]; !known {
			t.Errorf("%s: its request %s is not fuzzed by FuzzDecodeRequest: add it to requestTypes", spec.Name, typ)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			// The types of the function's variables (`var req api.X`), by
			// name, closures included.
			vars := map[string]string{}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if vs, ok := n.(*ast.ValueSpec); ok && vs.Type != nil {
					for _, id := range vs.Names {
						vars[id.Name] = typeString(vs.Type)
					}
				}
				return true
			})
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				ce, ok := n.(*ast.CallExpr)
				if !ok || len(ce.Args) != 1 {
					return true
				}
				if sel, ok := ce.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "decode" {
					return true
				}
				var typ string
				if u, ok := ce.Args[0].(*ast.UnaryExpr); ok && u.Op == token.AND {
					if id, ok := u.X.(*ast.Ident); ok {
						typ = vars[id.Name]
					}
				}
				if file == "register.go" && typ == "Req" {
					return true // a declared endpoint's request: checked above
				}
				covered[typ] = true
				if _, known := requestTypes[typ]; !known {
					t.Errorf("%s: decode(%s) of type %q, which FuzzDecodeRequest does not fuzz: add it to requestTypes (decode into &v, declared `var v T`)",
						fset.Position(ce.Pos()), typeString(ce.Args[0]), typ)
				}
				return true
			})
		}
	}
	for typ := range requestTypes {
		if !covered[typ] {
			t.Errorf("requestTypes has %s, which no endpoint and no handler decodes", typ)
		}
	}
}

func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + typeString(e.X)
	case *ast.UnaryExpr:
		return e.Op.String() + typeString(e.X)
	}
	return "?"
}
