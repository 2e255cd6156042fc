package controld

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/gpuaas/gpuaas/controld/alloc/allocapi"
	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/audit/auditapi"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/billing/billingapi"
	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/exposures"
	"github.com/gpuaas/gpuaas/controld/gate"
	"github.com/gpuaas/gpuaas/controld/identity/identityapi"
	"github.com/gpuaas/gpuaas/controld/identity/tokenapi"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox/outboxapi"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/controld/volumes/volumesapi"
	"github.com/gpuaas/gpuaas/controld/webhooks"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/nats-io/nats.go/micro"
)

// Handlers are registered through the endpoint's declaration
// (api.Endpoint, docs/decisions/0013-endpoint-descriptors.md): its name,
// access level and kind come from there, and the compiler checks the
// handler's request type (and, for reads, its response type) against the
// declaration's.

// query registers e's read handler: fn gets the decoded request. It is
// the root's form of endpoint.Query, for the handlers that are still
// methods of Server (they read the *call).
func query[Req, Resp any](s *Server, e api.Endpoint[Req, Resp], fn func(context.Context, *call, Req) (*Resp, error)) endpointDef {
	spec := endpoint.MustKind(e.Spec(), api.Query)
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
// reply is kept for replay comes from e (api.NewSecretMutation). It is
// the root's form of endpoint.Mutation.
func mutation[Req, Resp any](s *Server, e api.Endpoint[Req, Resp], fn func(context.Context, *call, Req) (work[Resp], error)) endpointDef {
	return refusalAuditedMutation(s, e, fn, nil)
}

// refusalAuditedMutation is a mutation some of whose refusals are audited
// too: refused is called with every error, after the mutation's
// transaction was rolled back, and writes the audit rows it wants in
// writes of their own.
func refusalAuditedMutation[Req, Resp any](s *Server, e api.Endpoint[Req, Resp], fn func(context.Context, *call, Req) (work[Resp], error),
	refused func(ctx context.Context, c *call, err error)) endpointDef {
	spec := endpoint.MustMutate(e.Spec())
	return endpointDef{spec: spec, handler: s.mutationHandler(spec, func(ctx context.Context, c *call) (mutate.Func, error) {
		req, err := decodeRequest[Req](c)
		if err != nil {
			return nil, err
		}
		w, err := fn(ctx, c, req)
		if err != nil || w == nil {
			return nil, err
		}
		return w.Untyped(), nil
	}, refused)}
}

// serve registers an endpoint a domain package declared (endpoint.Def):
// the same handler chain as query, mutation, refusalAuditedMutation and
// custom, with the request handed over as an endpoint.Request.
func (s *Server) serve(d endpoint.Def) endpointDef {
	spec := d.Spec()
	if d.IsCustom() {
		return endpointDef{spec: spec, handler: s.endpoint(spec.Name, spec.Access, func(ctx context.Context, c *call) ([]byte, error) {
			return d.Serve(ctx, c.request(), c.decode)
		})}
	}
	if d.IsMutation() {
		var refused func(ctx context.Context, c *call, err error)
		if d.HasRefusal() {
			refused = func(ctx context.Context, c *call, err error) { d.Refused(ctx, c.request(), err) }
		}
		return endpointDef{spec: spec, handler: s.mutationHandler(spec, func(ctx context.Context, c *call) (mutate.Func, error) {
			return d.Prepare(ctx, c.request(), c.decode)
		}, refused)}
	}
	return endpointDef{spec: spec, handler: s.endpoint(spec.Name, spec.Access, func(ctx context.Context, c *call) ([]byte, error) {
		resp, err := d.Read(ctx, c.request(), c.decode)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	})}
}

// serveAll is serve of each of defs.
func (s *Server) serveAll(defs ...[]endpoint.Def) []endpointDef {
	var out []endpointDef
	for _, ds := range defs {
		for _, d := range ds {
			out = append(out, s.serve(d))
		}
	}
	return out
}

// work is a mutation's work in its transaction with its response's type
// (endpoint.Work).
type work[Resp any] = endpoint.Work[Resp]

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

// decodeRequest reads the request body into a Req (endpoint.Decode).
func decodeRequest[Req any](c *call) (Req, error) { return endpoint.Decode[Req](c.decode) }

// endpointDef is one endpoint of the API as served: its declaration
// (api.Endpoint: name, access level, kind) and its handler.
type endpointDef struct {
	spec    api.Spec
	handler micro.Handler
}

// endpoints is the whole API: each domain's endpoints (handlers_*.go).
func (s *Server) endpoints() []endpointDef {
	return slices.Concat(s.gateEndpoints(),
		s.domainEndpoints())
}

// domainEndpoints are the endpoints the domain packages declare
// themselves (controld/endpoint, docs/decisions/0069-domain-endpoints.md),
// each given what it needs of the server.
func (s *Server) domainEndpoints() []endpointDef {
	return s.serveAll(
		project.Endpoints(project.Deps{DB: s.pool, Tokens: s.identity, Now: s.now}),
		sessions.Endpoints(sessions.Deps{DB: s.pool, JS: s.js, Now: s.now}),
		idle.Endpoints(idle.Deps{DB: s.pool, Settings: s.cfg.Idle, Now: s.now}),
		auditapi.Endpoints(auditapi.Deps{DB: s.pool, Now: s.now}),
		node.Endpoints(node.Deps{DB: s.pool, NATS: s.cfg.NATS, Volumes: volumes.OnNode, Kick: s.kickQueue, Now: s.now}),
		jobs.Endpoints(jobs.Deps{DB: s.pool, Config: s.jobsConfig(), Logs: s.readLogs, Now: s.now}),
		catalog.Endpoints(catalog.Deps{DB: s.pool, Availability: node.Availability}),
		allocapi.Endpoints(allocapi.Deps{DB: s.pool, Rules: s.allocRules, Idle: s.cfg.Idle, NATS: s.cfg.NATS, Kick: s.kickQueue, Now: s.now}),
		volumesapi.Endpoints(volumesapi.Deps{DB: s.pool, Rules: s.allocRules, FundsRefusal: s.fundsRefusal,
			Audited: s.gateDeps().AuditedTx, Now: s.now}),
		payments.Endpoints(payments.Deps{DB: s.pool, Payments: s.payments}),
		billingapi.Endpoints(billingapi.Deps{DB: s.pool, Settings: s.cfg.Billing, Now: s.now}),
		secrets.Endpoints(secrets.Deps{DB: s.pool, Key: s.cfg.SecretsKey, Now: s.now}),
		webhooks.Endpoints(webhooks.Deps{DB: s.pool, Policy: s.cfg.Webhooks.Policy, Now: s.now}),
		exposures.Endpoints(exposures.Deps{DB: s.pool, AppsURL: s.cfg.AppsURL, Allocation: exposedAllocation, Workload: exposedWorkload,
			Verdict: s.gateDeps().HTTPVerdict, Audited: s.gateDeps().AuditedTx, Now: s.now}),
		ca.Endpoints(ca.Deps{DB: s.pool, CAs: s.cas, CertTTL: s.cfg.SSHCertTTL, GatewayAddr: s.cfg.GatewayAddr,
			TrustBundle: s.trustBundle, Delegated: errDelegated, Now: s.now}),
		busauth.Endpoints(busauth.Deps{DB: s.pool, Now: s.now}),
		outboxapi.Endpoints(outboxapi.Deps{DB: s.pool, JS: s.js, Now: s.now}),
		identityapi.Endpoints(identityapi.Deps{DB: s.pool, IDs: s.identity, Mut: s.mut, Now: s.now}),
		tokenapi.Endpoints(tokenapi.Deps{DB: s.pool, IDs: s.identity, Delegated: errDelegated, Now: s.now}),
		images.Endpoints(images.Deps{DB: s.pool, Registry: s.registry, Now: s.now,
			RunPrice: func(ctx context.Context, q store.Querier, digest string) (*api.RunPrice, error) {
				return apps.RunPrice(ctx, q, digest, nil)
			}}),
		apps.Endpoints(apps.Deps{DB: s.pool, Currency: billing.DefaultCurrency, Now: s.now}),
		workloads.Endpoints(workloads.Deps{DB: s.pool, Logs: s.readLogs, Now: s.now,
			Config: workloads.Config{LogMaxBytes: s.cfg.Streams.JobLogMaxBytes}}),
		gate.Endpoints(s.gateDeps()),
	)
}

// fundsRefusal audits a create refused for funds as action, in a write
// of its own (allocapi.FundsRefusal, which alloc.create uses too).
func (s *Server) fundsRefusal(action string) endpoint.Refusal {
	return allocapi.FundsRefusal(s.pool, s.now, action)
}

// request is c as a domain's handler sees it (endpoint.Request).
func (c *call) request() *endpoint.Request {
	return &endpoint.Request{Principal: c.principal, Project: c.project, Corr: c.corr, Log: c.log, SourceOf: c.sourceOf,
		IdempotencyKey: c.req.Headers().Get(api.HeaderIdempotencyKey)}
}
