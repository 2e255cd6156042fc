package endpoint_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestKindMustMatchTheDeclaration: binding a query's declaration as a
// mutation, or a mutation's as a query, panics: the first would skip
// the Idempotency-Key and audit, the second store a read's replies.
func TestKindMustMatchTheDeclaration(t *testing.T) {
	for _, tc := range []struct {
		name string
		bind func()
		want string
	}{
		{"query as mutation", func() {
			endpoint.Mutation(api.OpProjectList, func(context.Context, *endpoint.Request, api.Empty) (endpoint.Work[api.ProjectListResponse], error) {
				return nil, nil
			})
		}, "registered as a mutation"},
		{"mutation as query", func() {
			endpoint.Query(api.OpProjectCreate, func(context.Context, *endpoint.Request, api.ProjectCreateRequest) (*api.Project, error) {
				return nil, nil
			})
		}, "registered as a query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, tc.want) {
					t.Errorf("panic: got %q; want one saying %q", r, tc.want)
				}
			}()
			tc.bind()
		})
	}
	q := endpoint.Query(api.OpProjectList, func(context.Context, *endpoint.Request, api.Empty) (*api.ProjectListResponse, error) {
		return nil, nil
	})
	if q.IsMutation() || q.Spec().Name != api.EndpointProjectList || q.Spec().Access != api.LoggedIn {
		t.Errorf("query: got mutation %v, spec %+v; want a read of %s, logged in", q.IsMutation(), q.Spec(), api.EndpointProjectList)
	}
}

// TestDecodeBeforeTheHandler: the handler gets the request decoded; a
// body with an unknown field is invalid_argument and the handler does
// not run; an endpoint taking api.Empty reads no body at all.
func TestDecodeBeforeTheHandler(t *testing.T) {
	ctx := context.Background()
	var got []string
	create := endpoint.Mutation(api.OpProjectCreate, func(_ context.Context, _ *endpoint.Request, req api.ProjectCreateRequest) (endpoint.Work[api.Project], error) {
		got = append(got, req.Name)
		return nil, nil
	})
	if w, err := create.Prepare(ctx, &endpoint.Request{}, endpointtest.Body(api.ProjectCreateRequest{Name: "alpha"})); err != nil || w != nil {
		t.Fatalf("prepare: got work %v, %v; want none and no error", w != nil, err)
	}
	_, err := create.Prepare(ctx, &endpoint.Request{}, endpointtest.Body(map[string]string{"name": "beta", "nmae": "typo"}))
	if api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("unknown field: got %v; want invalid_argument", err)
	}
	if len(got) != 1 || got[0] != "alpha" {
		t.Errorf("handler saw %q; want only alpha", got)
	}
	read := 0
	list := endpoint.Query(api.OpProjectList, func(context.Context, *endpoint.Request, api.Empty) (*api.ProjectListResponse, error) {
		return &api.ProjectListResponse{}, nil
	})
	if _, err := list.Read(ctx, &endpoint.Request{}, func(any) error { read++; return nil }); err != nil || read != 0 {
		t.Errorf("api.Empty: body read %d times, %v; want never", read, err)
	}
}

// TestRefusalAuditedTellsItsRefusal: a RefusalAudited mutation is a
// mutation whose Refused tells its Refusal the request and the error; a
// plain Mutation's Refused tells no one.
func TestRefusalAuditedTellsItsRefusal(t *testing.T) {
	ctx := context.Background()
	fn := func(context.Context, *endpoint.Request, api.VolumeCreateRequest) (endpoint.Work[api.Volume], error) {
		return nil, nil
	}
	var told []string
	d := endpoint.RefusalAudited(api.OpVolumeCreate, fn, func(_ context.Context, r *endpoint.Request, err error) {
		told = append(told, r.IdempotencyKey+": "+err.Error())
	})
	if !d.IsMutation() || !d.HasRefusal() || d.IsCustom() || d.Spec().Name != api.EndpointVolumeCreate {
		t.Fatalf("got mutation %v, refusal %v, custom %v, %s; want a mutation of %s with a refusal",
			d.IsMutation(), d.HasRefusal(), d.IsCustom(), d.Spec().Name, api.EndpointVolumeCreate)
	}
	d.Refused(ctx, &endpoint.Request{IdempotencyKey: "k1"}, api.Errorf(api.CodeInsufficientFunds, "short"))
	if len(told) != 1 || !strings.HasPrefix(told[0], "k1: ") || !strings.Contains(told[0], "short") {
		t.Errorf("refusal told %q; want one line for k1 with the error", told)
	}
	plain := endpoint.Mutation(api.OpVolumeCreate, fn)
	if plain.HasRefusal() {
		t.Error("a plain mutation has a refusal")
	}
	plain.Refused(ctx, &endpoint.Request{}, api.Errorf(api.CodeInsufficientFunds, "short")) // must not panic
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "registered as a mutation") {
			t.Errorf("query as refusal-audited mutation: panic %q; want one saying it is registered as a mutation", r)
		}
	}()
	endpoint.RefusalAudited(api.OpVolumeGet, func(context.Context, *endpoint.Request, api.VolumeRef) (endpoint.Work[api.Volume], error) {
		return nil, nil
	}, nil)
}

// TestCustomDecodesOnDemand: a Custom endpoint is neither a read nor a
// mutation; its handler's reply is the body Serve returns, and the body
// is read only when the handler asks, strictly (an unknown field is
// invalid_argument).
func TestCustomDecodesOnDemand(t *testing.T) {
	ctx := context.Background()
	var names []string
	d := endpoint.Custom(api.OpProjectCreate, func(_ context.Context, r *endpoint.Request, decode func() (api.ProjectCreateRequest, error)) ([]byte, error) {
		if r.Project == "nodecode" {
			return []byte("skipped"), nil
		}
		req, err := decode()
		if err != nil {
			return nil, err
		}
		names = append(names, req.Name)
		return []byte(req.Name), nil
	})
	if !d.IsCustom() || d.IsMutation() || d.Spec().Name != api.EndpointProjectCreate {
		t.Fatalf("got custom %v, mutation %v, %s; want a custom %s", d.IsCustom(), d.IsMutation(), d.Spec().Name, api.EndpointProjectCreate)
	}
	if out, err := d.Serve(ctx, &endpoint.Request{}, endpointtest.Body(api.ProjectCreateRequest{Name: "alpha"})); err != nil || string(out) != "alpha" {
		t.Errorf("serve: got %q, %v; want alpha", out, err)
	}
	read := 0
	if out, err := d.Serve(ctx, &endpoint.Request{Project: "nodecode"}, func(any) error { read++; return nil }); err != nil || string(out) != "skipped" || read != 0 {
		t.Errorf("serve without decode: got %q, %v, body read %d times; want skipped, never read", out, err, read)
	}
	if _, err := d.Serve(ctx, &endpoint.Request{}, endpointtest.Body(map[string]string{"name": "beta", "nmae": "typo"})); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("unknown field: got %v; want invalid_argument", err)
	}
	if len(names) != 1 || names[0] != "alpha" {
		t.Errorf("handler decoded %q; want only alpha", names)
	}
}
