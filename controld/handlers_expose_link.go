package controld

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/exposures"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// exposeEndpoints are the exposures' endpoints that stay on the server
// (controld/exposures declares the others): expose.link writes its audit
// row, refusals included, outside a mutation (gate.Deps.AuditedTx).
func (s *Server) exposeEndpoints() []endpointDef {
	return []endpointDef{
		query(s, api.OpExposeLink, s.exposeLink),
	}
}

// exposedAllocation is alloc.Get as p sees allocation id
// (exposures.Deps: alloc imports exposures).
func exposedAllocation(ctx context.Context, q store.Batcher, p *identity.Principal, id string) (api.Allocation, error) {
	return alloc.Get(ctx, q, alloc.Actor{UserID: p.UserID, Role: p.Role}, id)
}

// exposedWorkload is workloads.Get as p sees workload id
// (exposures.Deps: workloads imports exposures).
func exposedWorkload(ctx context.Context, q store.Querier, p *identity.Principal, id string) (api.Workload, error) {
	return workloads.Get(ctx, q, alloc.Actor{UserID: p.UserID, Role: p.Role}, id)
}

// exposeLink mints a one-time link for a browser into an exposure the
// caller may open now (the verdict gate.authorize_http would give their
// session). It is bound to the caller's login: the front's cookie ends
// with it. Machine tokens get none (tokenEndpoints): a browser is a
// person's. Audited as the credential it is.
func (s *Server) exposeLink(ctx context.Context, c *call, req api.ExposeLinkRequest) (*api.ExposeLinkResponse, error) {
	allocID, port, ok := api.ParseExposureHost(strings.ToLower(strings.TrimSpace(req.Host)))
	if !ok {
		return nil, api.Errorf(api.CodeInvalidArgument, "host: %q is not <port>-<allocation>", req.Host).
			WithHint("give the exposure's URL, as `gpuaas expose list` shows it")
	}
	path, err := exposures.CheckLinkPath(req.Path)
	if err != nil {
		return nil, err
	}
	v, _, err := s.gateDeps().HTTPVerdict(ctx, s.pool, allocID, port, gateproto.GateAuthorizeHTTPRequest{Host: req.Host,
		SessionID: c.principal.SessionID, UserID: c.principal.UserID})
	if err != nil {
		return nil, err
	}
	switch v.Verdict {
	case gateproto.VerdictAllow:
	case gateproto.VerdictNotFound, gateproto.VerdictGone:
		return nil, api.Errorf(api.CodeNotFound, "%s", v.Reason).WithHint("see `gpuaas expose list`")
	default:
		return nil, api.Errorf(api.CodeForbidden, "%s", v.Reason)
	}
	var resp api.ExposeLinkResponse
	err = s.gateDeps().AuditedTx(ctx, c.request(), func(ctx context.Context, tx pgx.Tx, e *audit.Entry) error {
		*e = audit.Entry{Action: api.EndpointExposeLink, TargetType: "exposure", TargetID: v.Exposure.ID,
			ProjectID: v.Exposure.ProjectID, Detail: map[string]any{"session_id": c.principal.SessionID, "path": path}}
		var err error
		resp, err = exposures.MintLink(ctx, tx, *v.Exposure, c.principal.UserID, c.principal.SessionID, path, s.now())
		return err
	})
	return &resp, err
}
