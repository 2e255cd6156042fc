package exposures

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// DB is what exposures' endpoints read outside a mutation's transaction,
// and where a link is redeemed in a transaction of its own.
type DB interface {
	store.Batcher
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Deps are what exposures' endpoints need of the server. controld/alloc
// and controld/workloads import this package (an allocation's end ends
// its exposures), so their lookups are handed in.
type Deps struct {
	DB DB
	// AppsURL is the URL pattern of exposures, "*" standing for their
	// host label (controld.Config.AppsURL); "" when unknown.
	AppsURL string
	// Allocation is alloc.Get as the caller p sees allocation id.
	Allocation func(ctx context.Context, q store.Batcher, p *identity.Principal, id string) (api.Allocation, error)
	// Workload is workloads.Get as the caller p sees workload id.
	Workload func(ctx context.Context, q store.Querier, p *identity.Principal, id string) (api.Workload, error)
	// Verdict is gate.authorize_http's verdict on a request for port of
	// allocation allocID (gate.Deps.HTTPVerdict: controld/gate imports
	// this package); expose.link mints a link only where it allows.
	Verdict func(ctx context.Context, q store.Batcher, allocID string, port int, req gateproto.GateAuthorizeHTTPRequest) (*gateproto.GateAuthorizeHTTPResponse, api.Allocation, error)
	// Audited runs fn in a transaction that also writes the audit row fn
	// fills, and audits a refusal in a write of its own
	// (gate.Deps.AuditedTx): expose.link's link is a credential.
	Audited func(ctx context.Context, r *endpoint.Request, fn func(ctx context.Context, tx pgx.Tx, e *audit.Entry) error) error
	Now     func() time.Time
}

// Endpoints are exposures' (docs/expose.md,
// docs/decisions/0069-domain-endpoints.md): owners and members serve an
// allocation's ports over HTTPS, and end them; viewers list them; a
// logged-in user mints a one-time link (endpoints_link.go), which the
// HTTPS front redeems. gate.authorize_http, which signs node tickets, is
// the gateway's (controld/gate).
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpExposeCreate, h.create),
		endpoint.Query(api.OpExposeList, h.list),
		endpoint.Mutation(api.OpExposeRemove, h.remove),
		endpoint.Query(gateproto.OpGateRedeemLink, h.redeemLink),
		endpoint.Query(api.OpExposeLink, h.link),
	}
}

type handlers struct{ Deps }

func (h handlers) create(_ context.Context, r *endpoint.Request, req api.ExposeCreateRequest) (endpoint.Work[api.Exposure], error) {
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
		allocID, err := h.exposedAllocation(ctx, tx, r, req.Allocation)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		a, err := h.Allocation(ctx, tx, r.Principal, allocID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if _, err := project.Authorize(ctx, tx, a.ProjectID, r.Principal.UserID, r.Principal.Role, project.AccessWrite); err != nil {
			return nil, mutate.Effect{}, err
		}
		if a.State != api.AllocActive {
			return nil, mutate.Effect{}, api.Errorf(api.CodeConflict, "allocation %s is %s, not active", a.ID, a.State).
				WithHint("expose a port once `gpuaas alloc get " + a.ID + "` says active")
		}
		e, err := Create(ctx, tx, CreateArgs{ProjectID: a.ProjectID, AllocationID: a.ID,
			Port: req.Port, Share: share, Name: req.Name, TTL: ttl, ActorID: r.Principal.UserID}, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		e.URL = h.url(e.Host)
		eff, err := exposureEffect(ctx, tx, api.EndpointExposeCreate, e)
		return &e, eff, err
	}, nil
}

// exposedAllocation is the allocation whose port ref names: ref itself,
// or a workload's allocation (its containers share the allocation's
// network: docs/apps.md), while the workload has not ended.
func (h handlers) exposedAllocation(ctx context.Context, tx pgx.Tx, r *endpoint.Request, ref string) (string, error) {
	if !strings.HasPrefix(ref, ids.Workload+"-") {
		return ref, nil
	}
	w, err := h.Workload(ctx, tx, r.Principal, ref)
	if err != nil {
		return "", err
	}
	if w.RemovedAt != nil || api.WorkloadFinal(w.State) {
		return "", api.Errorf(api.CodeConflict, "workload %s is %s: nothing of it listens", w.ID, w.State).
			WithHint("start it again with `gpuaas app run`")
	}
	return w.AllocationID, nil
}

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.ExposeListRequest) (*api.ExposureList, error) {
	projectID := ""
	if a := strings.TrimSpace(req.Allocation); a != "" {
		got, err := h.Allocation(ctx, h.DB, r.Principal, a)
		if err != nil {
			return nil, err
		}
		projectID, req.Allocation = got.ProjectID, got.ID
	} else {
		ref, err := project.Ref(ctx, h.DB, r, strings.TrimSpace(req.Project))
		if err != nil {
			return nil, err
		}
		projectID = ref
	}
	p, err := project.Authorize(ctx, h.DB, projectID, r.Principal.UserID, r.Principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	es, err := List(ctx, h.DB, p.ID, req.Allocation, h.Now())
	if err != nil {
		return nil, err
	}
	if es == nil {
		es = []api.Exposure{}
	}
	for i := range es {
		es[i].URL = h.url(es[i].Host)
	}
	return &api.ExposureList{Exposures: es}, nil
}

func (h handlers) remove(ctx context.Context, r *endpoint.Request, req api.ExposeRemoveRequest) (endpoint.Work[api.Exposure], error) {
	req.Exposure = strings.TrimSpace(req.Exposure)
	if req.Exposure == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "exposure: which exposure? give its id or name").
			WithHint("see `gpuaas expose list`")
	}
	ref, err := project.Ref(ctx, h.DB, r, strings.TrimSpace(req.Project))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Exposure, mutate.Effect, error) {
		e, err := h.ownedExposure(ctx, tx, r, ref, req.Exposure)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		e, err = Remove(ctx, tx, e.ID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		e.URL = h.url(e.Host)
		eff, err := exposureEffect(ctx, tx, api.EndpointExposeRemove, e)
		return &e, eff, err
	}, nil
}

// ownedExposure is the live exposure ref names (its id, or its name in
// projectRef) when the caller may end it: its creator, or an owner of its
// project. A caller who cannot read the project learns only "not found".
func (h handlers) ownedExposure(ctx context.Context, q store.Querier, r *endpoint.Request, projectRef, ref string) (api.Exposure, error) {
	projectID := ""
	if projectRef != "" {
		p, err := project.Resolve(ctx, q, projectRef)
		if err == nil {
			projectID = p.ID
		}
	}
	e, err := Find(ctx, q, projectID, ref, h.Now())
	if err != nil {
		return e, err
	}
	want := project.AccessAdmin
	if e.CreatedBy == r.Principal.UserID {
		want = project.AccessWrite
	}
	if _, err := project.Authorize(ctx, q, e.ProjectID, r.Principal.UserID, r.Principal.Role, project.AccessRead); err != nil {
		return api.Exposure{}, api.Errorf(api.CodeNotFound, "no live exposure %s", ref).WithHint("see `gpuaas expose list`")
	}
	if _, err := project.Authorize(ctx, q, e.ProjectID, r.Principal.UserID, r.Principal.Role, want); err != nil {
		return api.Exposure{}, api.Errorf(api.CodeForbidden, "exposure %s is %s's: only they or a project owner may end it", e.ID, e.CreatedBy)
	}
	return e, nil
}

// exposureEffect is the audit row of an exposure's change and its
// expose.changed event to the project's members.
func exposureEffect(ctx context.Context, tx pgx.Tx, action string, e api.Exposure) (mutate.Effect, error) {
	ev, err := Event(ctx, tx, e)
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

// redeemLink is the front redeeming a link's code, once.
func (h handlers) redeemLink(ctx context.Context, _ *endpoint.Request, req gateproto.GateRedeemLinkRequest) (*gateproto.GateRedeemLinkResponse, error) {
	allocID, port, ok := api.ParseExposureHost(strings.ToLower(strings.TrimSpace(req.Host)))
	if !ok || req.Code == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "host and code are required")
	}
	var resp gateproto.GateRedeemLinkResponse
	err := pgx.BeginFunc(ctx, h.DB, func(tx pgx.Tx) error {
		var err error
		resp, err = RedeemLink(ctx, tx, allocID, port, req.Code, h.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

// url is where the exposure with host label is served (Deps.AppsURL);
// "" when controld does not know.
func (h handlers) url(label string) string {
	if h.AppsURL == "" {
		return ""
	}
	return strings.Replace(h.AppsURL, "*", label, 1)
}
