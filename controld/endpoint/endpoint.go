// Package endpoint is what a controld domain needs to declare the handlers
// of its API endpoints without depending on the server that serves them
// (docs/decisions/0069-domain-endpoints.md): the request as a handler sees
// it, a mutation's typed work, and Query/Mutation, which bind a handler to
// its declaration (api.Endpoint, docs/decisions/0013-endpoint-descriptors.md).
// controld's root turns every Def into the micro handler with the same
// access checks, rate limits, Idempotency-Key, audit, outbox and replay
// rules whichever package declared it.
package endpoint

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Request is one API request as a handler sees it, after the server
// authenticated and authorized it; the body is decoded by the server into
// the declaration's request type before the handler runs.
type Request struct {
	// Principal is the caller; nil on endpoints that need no login.
	Principal *identity.Principal
	// Project is the Gpuaas-Project header.
	Project string
	// Corr is the request's correlation id, and Log the logger that puts
	// it on every line about the request.
	Corr string
	Log  *slog.Logger
	// IdempotencyKey is the request's Idempotency-Key header as sent; a
	// mutation's is checked by the server before the handler runs, a
	// query's is never checked and no query handler reads it.
	IdempotencyKey string
	// SourceOf looks the connection's address up (once); see Source.
	SourceOf func() string
}

// Source is the network address of the connection a request came from,
// when the server knows it (a client that has not logged in), else "".
func (r *Request) Source() string {
	if r.SourceOf == nil {
		return ""
	}
	return r.SourceOf()
}

// Work is a mutation's work in its transaction (mutate.Func) with its
// response's type.
type Work[Resp any] func(ctx context.Context, tx pgx.Tx) (*Resp, mutate.Effect, error)

// Untyped is w as mutate.Runner runs it.
func (w Work[Resp]) Untyped() mutate.Func {
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) { return w(ctx, tx) }
}

// Decoder reads the request's body into v (the server's: unknown fields
// and trailing values are refused with invalid_argument).
type Decoder func(v any) error

// Def is one endpoint as a domain declares it: its declaration and its
// handler, typed against each other by Query or Mutation. The server
// serves a query with Read and a mutation with Prepare.
type Def struct {
	spec    api.Spec
	read    func(ctx context.Context, r *Request, decode Decoder) (any, error)
	prepare func(ctx context.Context, r *Request, decode Decoder) (mutate.Func, error)
	refused Refusal
	custom  func(ctx context.Context, r *Request, decode Decoder) ([]byte, error)
}

// Refusal is told a mutation's error after its transaction was rolled
// back, and writes the audit rows it wants of the refusal in writes of
// its own (a create refused for funds: docs/volumes.md).
type Refusal func(ctx context.Context, r *Request, err error)

// Spec is the endpoint's declaration: name, access level, kind.
func (d Def) Spec() api.Spec { return d.spec }

// IsMutation reports whether d is served as a mutation (Prepare), else as
// a read (Read) or, when IsCustom, by Serve.
func (d Def) IsMutation() bool { return d.prepare != nil }

// IsCustom reports whether d runs the whole request itself (Serve).
func (d Def) IsCustom() bool { return d.custom != nil }

// Refused is told every error of d's mutation after its transaction was
// rolled back (RefusalAudited); nothing when d has no such rule.
func (d Def) Refused(ctx context.Context, r *Request, err error) {
	if d.refused != nil {
		d.refused(ctx, r, err)
	}
}

// HasRefusal reports whether d's refusals are told to a Refusal.
func (d Def) HasRefusal() bool { return d.refused != nil }

// Serve runs a custom endpoint's handler (Custom): its reply's body.
func (d Def) Serve(ctx context.Context, r *Request, decode Decoder) ([]byte, error) {
	return d.custom(ctx, r, decode)
}

// Read decodes a query's request and runs its handler; the answer is the
// declaration's response type (the server marshals it).
func (d Def) Read(ctx context.Context, r *Request, decode Decoder) (any, error) {
	return d.read(ctx, r, decode)
}

// Prepare decodes a mutation's request and runs its handler, which
// validates it and returns the work to run in the mutation's transaction
// (nil: nothing to run).
func (d Def) Prepare(ctx context.Context, r *Request, decode Decoder) (mutate.Func, error) {
	return d.prepare(ctx, r, decode)
}

// Query binds e's read handler: fn gets the decoded request. It panics
// when e is not declared a query: registering a mutation as a read would
// skip its Idempotency-Key and audit.
func Query[Req, Resp any](e api.Endpoint[Req, Resp], fn func(context.Context, *Request, Req) (*Resp, error)) Def {
	spec := MustKind(e.Spec(), api.Query)
	return Def{spec: spec, read: func(ctx context.Context, r *Request, decode Decoder) (any, error) {
		req, err := Decode[Req](decode)
		if err != nil {
			return nil, err
		}
		return fn(ctx, r, req)
	}}
}

// Mutation binds e's mutation handler: fn gets the decoded request and
// returns the work to run in the mutation's transaction. Whether its
// reply is kept for replay comes from e (api.NewSecretMutation). It
// panics when e is not declared a mutation.
func Mutation[Req, Resp any](e api.Endpoint[Req, Resp], fn func(context.Context, *Request, Req) (Work[Resp], error)) Def {
	spec := MustMutate(e.Spec())
	return Def{spec: spec, prepare: func(ctx context.Context, r *Request, decode Decoder) (mutate.Func, error) {
		req, err := Decode[Req](decode)
		if err != nil {
			return nil, err
		}
		w, err := fn(ctx, r, req)
		if err != nil || w == nil {
			return nil, err
		}
		return w.Untyped(), nil
	}}
}

// RefusalAudited is Mutation whose refusals are audited too: refused is
// told every error of its work in the mutation's transaction, after that
// transaction was rolled back (the root's refusalAuditedMutation); fn's
// own refusals, before any transaction, are not told.
func RefusalAudited[Req, Resp any](e api.Endpoint[Req, Resp], fn func(context.Context, *Request, Req) (Work[Resp], error), refused Refusal) Def {
	d := Mutation(e, fn)
	d.refused = refused
	return d
}

// Custom binds a handler that runs the whole request itself (the
// logins: their refusals are audited and limited outside a mutation's
// transaction): the server checks the access level and answers with the
// body fn returns. It still takes its name, access level and kind from
// e, and decode, called when fn wants the request, reads e's request
// type.
func Custom[Req, Resp any](e api.Endpoint[Req, Resp], fn func(ctx context.Context, r *Request, decode func() (Req, error)) ([]byte, error)) Def {
	return Def{spec: e.Spec(), custom: func(ctx context.Context, r *Request, decode Decoder) ([]byte, error) {
		return fn(ctx, r, func() (Req, error) { return Decode[Req](decode) })
	}}
}

// MustKind returns spec, or panics when it is not of kind.
func MustKind(spec api.Spec, kind api.Kind) api.Spec {
	if spec.Kind != kind {
		panic(fmt.Sprintf("controld: %s is declared a %s, registered as a %s", spec.Name, spec.Kind, kind))
	}
	return spec
}

// MustMutate returns spec, or panics when it is not a mutation.
func MustMutate(spec api.Spec) api.Spec {
	if !spec.Mutates() {
		panic(fmt.Sprintf("controld: %s is declared a %s, registered as a mutation", spec.Name, spec.Kind))
	}
	return spec
}

// Decode reads the request body into a Req. An endpoint that takes
// nothing (api.Empty) reads no body, as its handlers never did.
func Decode[Req any](decode Decoder) (Req, error) {
	var req Req
	if _, none := any(req).(api.Empty); none {
		return req, nil
	}
	return req, decode(&req)
}

// Pointer is a handler's answer from a function that returns a value.
func Pointer[T any](v T, err error) (*T, error) { return &v, err }

// PointerEffect is a mutation's answer from a function that returns a
// value.
func PointerEffect[T any](v T, eff mutate.Effect, err error) (*T, mutate.Effect, error) {
	return &v, eff, err
}
