// Package endpointtest runs a domain's endpoints (controld/endpoint) in
// tests the way controld serves them, minus the bus: the request is
// decoded strictly from JSON, a query's handler reads the database, and a
// mutation's work runs in mutate.Runner's transaction with its audit,
// outbox and idempotency rows. Domain packages test the rules of their
// endpoints with it against real Postgres
// (docs/decisions/0069-domain-endpoints.md).
package endpointtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Find is the endpoint named name among defs; the test stops when there
// is none.
func Find(t testing.TB, defs []endpoint.Def, name string) endpoint.Def {
	t.Helper()
	for _, d := range defs {
		if d.Spec().Name == name {
			return d
		}
	}
	t.Fatalf("no endpoint %s among the %d given", name, len(defs))
	return endpoint.Def{}
}

// Body is a Decoder of req's JSON that refuses unknown fields and
// trailing values, as controld's does.
func Body(req any) endpoint.Decoder {
	return func(v any) error {
		data, err := json.Marshal(req)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return api.Errorf(api.CodeInvalidArgument, "malformed request body: %v", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return api.Errorf(api.CodeInvalidArgument, "malformed request body: more than one JSON value")
		}
		return nil
	}
}

// Read runs query d with req and returns its answer as a Resp.
func Read[Resp any](ctx context.Context, d endpoint.Def, r *endpoint.Request, req any) (*Resp, error) {
	if d.IsMutation() {
		return nil, fmt.Errorf("%s is a mutation", d.Spec().Name)
	}
	out, err := d.Read(ctx, r, Body(req))
	if err != nil {
		return nil, err
	}
	resp, ok := out.(*Resp)
	if !ok {
		return nil, fmt.Errorf("%s answered a %T", d.Spec().Name, out)
	}
	return resp, nil
}

// Mutate runs mutation d with req through run under r's Idempotency-Key
// (a fresh one when r has none) and decodes its reply into a Resp. An
// error of the work is told to d's Refusal (endpoint.RefusalAudited) after
// the transaction was rolled back, as the server does.
func Mutate[Resp any](ctx context.Context, run *mutate.Runner, d endpoint.Def, r *endpoint.Request, req any) (*Resp, error) {
	if !d.IsMutation() {
		return nil, fmt.Errorf("%s is a query", d.Spec().Name)
	}
	work, err := d.Prepare(ctx, r, Body(req))
	if err != nil {
		return nil, err
	}
	spec := d.Spec()
	actor := ""
	if r.Principal != nil {
		actor = r.Principal.UserID
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	keyed := *r
	if keyed.IdempotencyKey == "" {
		keyed.IdempotencyKey = ids.New("key")
	}
	out, err := run.Run(ctx, mutate.Request{Endpoint: spec.Name, ActorID: actor, Key: keyed.IdempotencyKey, CorrelationID: r.Corr,
		Fingerprint: append([]byte(r.Project+"\n"), body...), NoReplay: !spec.Replayable()}, work)
	if err != nil {
		d.Refused(ctx, &keyed, err)
		return nil, err
	}
	var resp Resp
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("%s reply: %w", spec.Name, err)
	}
	return &resp, nil
}
