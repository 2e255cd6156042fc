package controld

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Handlers are registered through the endpoint's declaration
// (api.Endpoint, docs/decisions/0013-endpoint-descriptors.md): its name,
// access level and kind come from there, and the compiler checks the
// handler's request type (and, for reads, its response type) against the
// declaration's.

// query registers e's read handler: fn gets the decoded request.
func query[Req, Resp any](s *Server, e api.Endpoint[Req, Resp], fn func(context.Context, *call, Req) (*Resp, error)) endpointDef {
	spec := mustKind(e.Spec(), api.Query)
	return endpointDef{spec: spec, handler: s.endpoint(spec.Name, spec.Access, func(ctx context.Context, c *call) ([]byte, error) {
		req, err := decodeRequest[Req](c)
		if err != nil {
			return nil, err
		}
		resp, err := fn(ctx, c, req)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	})}
}

// mutation registers e's mutation handler: fn gets the decoded request
// and returns the work to run in the mutation's transaction. Whether its
// reply is kept for replay comes from e (api.NewSecretMutation).
func mutation[Req, Resp any](s *Server, e api.Endpoint[Req, Resp], fn func(context.Context, *call, Req) (work[Resp], error)) endpointDef {
	return refusalAuditedMutation(s, e, fn, nil)
}

// refusalAuditedMutation is a mutation some of whose refusals are audited
// too: refused is called with every error, after the mutation's
// transaction was rolled back, and writes the audit rows it wants in
// writes of their own.
func refusalAuditedMutation[Req, Resp any](s *Server, e api.Endpoint[Req, Resp], fn func(context.Context, *call, Req) (work[Resp], error),
	refused func(ctx context.Context, c *call, err error)) endpointDef {
	spec := e.Spec()
	if !spec.Mutates() {
		panic(fmt.Sprintf("controld: %s is declared a %s, registered as a mutation", spec.Name, spec.Kind))
	}
	return endpointDef{spec: spec, handler: s.mutationHandler(spec, func(ctx context.Context, c *call) (mutate.Func, error) {
		req, err := decodeRequest[Req](c)
		if err != nil {
			return nil, err
		}
		w, err := fn(ctx, c, req)
		if err != nil || w == nil {
			return nil, err
		}
		return w.untyped(), nil
	}, refused)}
}

// work is a mutation's work in its transaction (mutate.Func) with its
// response's type.
type work[Resp any] func(ctx context.Context, tx pgx.Tx) (*Resp, mutate.Effect, error)

// untyped is w as mutate.Runner runs it.
func (w work[Resp]) untyped() mutate.Func {
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) { return w(ctx, tx) }
}

// custom registers a handler that runs the whole request itself (the
// logins: their refusals are audited and limited outside the mutation's
// transaction); it still takes its name, access level and kind from e,
// and decode, called when the handler wants the request, reads e's
// request type.
func custom[Req, Resp any](s *Server, e api.Endpoint[Req, Resp], fn func(ctx context.Context, c *call, decode func() (Req, error)) ([]byte, error)) endpointDef {
	spec := e.Spec()
	return endpointDef{spec: spec, handler: s.endpoint(spec.Name, spec.Access, func(ctx context.Context, c *call) ([]byte, error) {
		return fn(ctx, c, func() (Req, error) { return decodeRequest[Req](c) })
	})}
}

// mustKind returns spec, or panics when it is not of kind: registering a
// mutation as a read would skip its Idempotency-Key and audit.
func mustKind(spec api.Spec, kind api.Kind) api.Spec {
	if spec.Kind != kind {
		panic(fmt.Sprintf("controld: %s is declared a %s, registered as a %s", spec.Name, spec.Kind, kind))
	}
	return spec
}

// decodeRequest reads the request body into a Req. An endpoint that takes
// nothing (api.Empty) reads no body, as its handlers never did.
func decodeRequest[Req any](c *call) (Req, error) {
	var req Req
	if _, none := any(req).(api.Empty); none {
		return req, nil
	}
	return req, c.decode(&req)
}

// pointer is a handler's answer from a function that returns a value.
func pointer[T any](v T, err error) (*T, error) { return &v, err }

// pointerEffect is a mutation's answer from a function that returns a
// value.
func pointerEffect[T any](v T, eff mutate.Effect, err error) (*T, mutate.Effect, error) {
	return &v, eff, err
}
