package controld

import (
	"context"
	"encoding/json"

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

// Every endpoint is declared by a domain package (endpoint.Def, from the
// declaration api.Endpoint: docs/decisions/0013-endpoint-descriptors.md
// and 0069-domain-endpoints.md); the server wraps each in its handler
// chain (access, rate limits, idempotency, logging).

// serve registers an endpoint a domain package declared (endpoint.Def):
// a read, a mutation (with its refusal audit, if any) or a custom
// handler, with the request handed over as an endpoint.Request.
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

// endpointDef is one endpoint of the API as served: its declaration
// (api.Endpoint: name, access level, kind) and its handler.
type endpointDef struct {
	spec    api.Spec
	handler micro.Handler
}

// endpoints is the whole API: the endpoints the domain packages declare
// themselves (controld/endpoint, docs/decisions/0069-domain-endpoints.md),
// each given what it needs of the server.
func (s *Server) endpoints() []endpointDef {
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
