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
