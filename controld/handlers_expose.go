package controld

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/exposures"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// exposeEndpoints are exposures' (controld/exposures, docs/expose.md):
// owners and members serve an allocation's ports over HTTPS, and end
// them; viewers list them.
func (s *Server) exposeEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpExposeCreate, s.exposeCreate),
		query(s, api.OpExposeList, s.exposeList),
		mutation(s, api.OpExposeRemove, s.exposeRemove),
		query(s, gateproto.OpGateAuthorizeHTTP, s.gateAuthorizeHTTP),
		query(s, api.OpExposeLink, s.exposeLink),
		query(s, gateproto.OpGateRedeemLink, s.gateRedeemLink),
	}
}

func (s *Server) exposeCreate(_ context.Context, c *call, req api.ExposeCreateRequest) (work[api.Exposure], error) {
	req.Allocation, req.Name = strings.TrimSpace(req.Allocation), strings.TrimSpace(req.Name)
	if req.Allocation == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "allocation: which allocation or workload? give its id").
			WithHint("see `gpuaas alloc list` or `gpuaas app ps`")
	}
	if err := api.CheckExposePort(req.Port); err != nil {
		return nil, err
	}
	share, err := api.CheckExposeShare(req.Share)
	if err != nil {
		return nil, err
	}
	ttl, err := api.ParseExposeTTL(req.TTL)
	if err != nil {
		return nil, err
	}
	if err := api.CheckExposeName(req.Name); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Exposure, mutate.Effect, error) {
		allocID, err := exposedAllocation(ctx, tx, c, req.Allocation)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		a, err := alloc.Get(ctx, tx, c.actor(), allocID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if _, err := project.Authorize(ctx, tx, a.ProjectID, c.principal.UserID, c.principal.Role, project.AccessWrite); err != nil {
			return nil, mutate.Effect{}, err
		}
		if a.State != api.AllocActive {
			return nil, mutate.Effect{}, api.Errorf(api.CodeConflict, "allocation %s is %s, not active", a.ID, a.State).
				WithHint("expose a port once `gpuaas alloc get " + a.ID + "` says active")
		}
		e, err := exposures.Create(ctx, tx, exposures.CreateArgs{ProjectID: a.ProjectID, AllocationID: a.ID,
			Port: req.Port, Share: share, Name: req.Name, TTL: ttl, ActorID: c.principal.UserID}, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		e.URL = s.exposureURL(e.Host)
		eff, err := exposureEffect(ctx, tx, api.EndpointExposeCreate, e)
		return &e, eff, err
	}, nil
}

// exposedAllocation is the allocation whose port ref names: ref itself,
// or a workload's allocation (its containers share the allocation's
// network: docs/apps.md), while the workload has not ended.
func exposedAllocation(ctx context.Context, tx pgx.Tx, c *call, ref string) (string, error) {
	if !strings.HasPrefix(ref, workloads.IDPrefix+"-") {
		return ref, nil
	}
	w, err := workloads.Get(ctx, tx, c.actor(), ref)
	if err != nil {
		return "", err
	}
	if w.RemovedAt != nil || api.WorkloadFinal(w.State) {
		return "", api.Errorf(api.CodeConflict, "workload %s is %s: nothing of it listens", w.ID, w.State).
			WithHint("start it again with `gpuaas app run`")
	}
	return w.AllocationID, nil
}

func (s *Server) exposeList(ctx context.Context, c *call, req api.ExposeListRequest) (*api.ExposureList, error) {
	projectID := ""
	if a := strings.TrimSpace(req.Allocation); a != "" {
		got, err := alloc.Get(ctx, s.pool, c.actor(), a)
		if err != nil {
			return nil, err
		}
		projectID, req.Allocation = got.ProjectID, got.ID
	} else {
		ref, err := s.projectRef(ctx, c, strings.TrimSpace(req.Project))
		if err != nil {
			return nil, err
		}
		projectID = ref
	}
	p, err := project.Authorize(ctx, s.pool, projectID, c.principal.UserID, c.principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	es, err := exposures.List(ctx, s.pool, p.ID, req.Allocation, s.now())
	if err != nil {
		return nil, err
	}
	if es == nil {
		es = []api.Exposure{}
	}
	for i := range es {
		es[i].URL = s.exposureURL(es[i].Host)
	}
	return &api.ExposureList{Exposures: es}, nil
}

func (s *Server) exposeRemove(ctx context.Context, c *call, req api.ExposeRemoveRequest) (work[api.Exposure], error) {
	req.Exposure = strings.TrimSpace(req.Exposure)
	if req.Exposure == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "exposure: which exposure? give its id or name").
			WithHint("see `gpuaas expose list`")
	}
	ref, err := s.projectRef(ctx, c, strings.TrimSpace(req.Project))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Exposure, mutate.Effect, error) {
		e, err := s.ownedExposure(ctx, tx, c, ref, req.Exposure)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		e, err = exposures.Remove(ctx, tx, e.ID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		e.URL = s.exposureURL(e.Host)
		eff, err := exposureEffect(ctx, tx, api.EndpointExposeRemove, e)
		return &e, eff, err
	}, nil
}

// ownedExposure is the live exposure ref names (its id, or its name in
// projectRef) when the caller may end it: its creator, or an owner of its
// project. A caller who cannot read the project learns only "not found".
func (s *Server) ownedExposure(ctx context.Context, q store.Querier, c *call, projectRef, ref string) (api.Exposure, error) {
	projectID := ""
	if projectRef != "" {
		p, err := project.Resolve(ctx, q, projectRef)
		if err == nil {
			projectID = p.ID
		}
	}
	e, err := exposures.Find(ctx, q, projectID, ref, s.now())
	if err != nil {
		return e, err
	}
	want := project.AccessAdmin
	if e.CreatedBy == c.principal.UserID {
		want = project.AccessWrite
	}
	if _, err := project.Authorize(ctx, q, e.ProjectID, c.principal.UserID, c.principal.Role, project.AccessRead); err != nil {
		return api.Exposure{}, api.Errorf(api.CodeNotFound, "no live exposure %s", ref).WithHint("see `gpuaas expose list`")
	}
	if _, err := project.Authorize(ctx, q, e.ProjectID, c.principal.UserID, c.principal.Role, want); err != nil {
		return api.Exposure{}, api.Errorf(api.CodeForbidden, "exposure %s is %s's: only they or a project owner may end it", e.ID, e.CreatedBy)
	}
	return e, nil
}

// exposureEffect is the audit row of an exposure's change and its
// expose.changed event to the project's members.
func exposureEffect(ctx context.Context, tx pgx.Tx, action string, e api.Exposure) (mutate.Effect, error) {
	ev, err := exposures.Event(ctx, tx, e)
	if err != nil {
		return mutate.Effect{}, err
	}
	return mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "exposure", TargetID: e.ID, ProjectID: e.ProjectID,
			Detail: map[string]any{"allocation_id": e.AllocationID, "port": e.Port, "share": e.Share,
				"expires_at": e.ExpiresAt, "name": e.Name}},
		Events: []outbox.Event{ev},
	}, nil
}

// exposureURL is where the exposure with host label is served
// (Config.AppsURL); "" when controld does not know.
func (s *Server) exposureURL(label string) string {
	if s.cfg.AppsURL == "" {
		return ""
	}
	return strings.Replace(s.cfg.AppsURL, "*", label, 1)
}
