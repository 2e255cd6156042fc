// Package volumesapi serves projects' persistent volumes' endpoints
// (docs/volumes.md). It is apart from package volumes because the
// endpoints check funds and allocations (controld/alloc), workloads and
// jobs, all of which import volumes (docs/decisions/0069-domain-endpoints.md).
package volumesapi

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// DB is what the endpoints need of the database outside a mutation's
// transaction: reads, and volume.quote's transaction that is always
// rolled back (a pool meets it).
type DB interface {
	store.Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Audited runs a gateway query's fn in a transaction that also writes the
// audit row fn fills, and audits a refusal on its own (gate.Deps.AuditedTx,
// shared with gate.authorize: controld/gate/audited.go).
type Audited func(ctx context.Context, r *endpoint.Request, fn func(ctx context.Context, tx pgx.Tx, e *audit.Entry) error) error

// Deps are what volumes' endpoints need of the server.
type Deps struct {
	DB DB
	// Rules are the checks a placement passes besides capacity; a volume
	// is refused funds as an allocation is (alloc.RequireFunds).
	Rules func() alloc.Rules
	// FundsRefusal audits a create refused for funds as action, in a
	// write of its own (the root's, shared with alloc.create).
	FundsRefusal func(action string) endpoint.Refusal
	Audited      Audited
	Now          func() time.Time
}

// Endpoints are projects' persistent volumes: members make, grow and
// remove them, viewers read; the gateway ends sftp sessions to them;
// admins price them.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.RefusalAudited(api.OpVolumeCreate, h.create, d.FundsRefusal("volume.create_refused")),
		endpoint.Query(api.OpVolumeGet, h.get),
		endpoint.Query(api.OpVolumeList, h.list),
		endpoint.RefusalAudited(api.OpVolumeResize, h.resize, d.FundsRefusal("volume.resize_refused")),
		endpoint.Mutation(api.OpVolumeRemove, h.remove),
		endpoint.RefusalAudited(api.OpVolumeAttach, h.attach, d.FundsRefusal("volume.attach_refused")), // endpoints_attach.go
		endpoint.Mutation(api.OpVolumeDetach, h.detach),
		endpoint.Query(api.OpVolumeQuote, h.quote),
		endpoint.Query(gateproto.OpGateVolumeEnd, h.gateVolumeEnd),          // sftp to a volume: endpoints_session.go
		endpoint.Mutation(api.OpAdminVolumePriceSet, h.adminVolumePriceSet), // endpoints_price.go
	}
}

type handlers struct{ Deps }

// noVolume refuses a request that names no volume.
func noVolume() error {
	return api.Errorf(api.CodeInvalidArgument, "which volume? name one").WithHint("see `gpuaas volume list`")
}

// quote is `volume create --dry-run`: the create's checks and its price,
// with the member's right to create, changing nothing.
func (h handlers) quote(ctx context.Context, r *endpoint.Request, req api.VolumeCreateRequest) (*api.VolumeQuote, error) {
	if err := api.CheckVolumeName(req.Name); err != nil {
		return nil, err
	}
	size, err := api.ParseVolumeSize(req.Size)
	if err != nil {
		return nil, err
	}
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	p, err := project.Authorize(ctx, h.DB, ref, r.Principal.UserID, r.Principal.Role, project.AccessWrite)
	if err != nil {
		return nil, err
	}
	q, err := h.quoteVolume(ctx, p, r.Principal.UserID, volumes.CreateArgs{ProjectID: p.ID, Name: req.Name, SizeBytes: size,
		Node: strings.TrimSpace(req.Node), ActorID: r.Principal.UserID})
	if err != nil {
		return nil, err
	}
	return &q, nil
}

// quoteVolume is volume.quote's answer: the create's funds check first,
// as create makes it (insufficient_funds or budget_exceeded with the
// same message), then its other checks and the price. The funds check
// takes the project's funds lock, so it runs in a transaction that is
// always rolled back: a dry run writes nothing, not even the refusal's
// audit row a real create writes.
func (h handlers) quoteVolume(ctx context.Context, p api.Project, userID string, a volumes.CreateArgs) (api.VolumeQuote, error) {
	tx, err := h.DB.Begin(ctx)
	if err != nil {
		return api.VolumeQuote{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := h.requireFunds(ctx, tx, p, userID, a.SizeBytes); err != nil {
		return api.VolumeQuote{}, err
	}
	return volumes.Quote(ctx, tx, a)
}

func (h handlers) create(ctx context.Context, r *endpoint.Request, req api.VolumeCreateRequest) (endpoint.Work[api.Volume], error) {
	if err := api.CheckVolumeName(req.Name); err != nil {
		return nil, err
	}
	size, err := api.ParseVolumeSize(req.Size)
	if err != nil {
		return nil, err
	}
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Volume, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := h.requireFunds(ctx, tx, p, r.Principal.UserID, size); err != nil {
			return nil, mutate.Effect{}, err
		}
		v, evs, err := volumes.Create(ctx, tx, volumes.CreateArgs{ProjectID: p.ID, Name: req.Name, SizeBytes: size,
			Node: strings.TrimSpace(req.Node), ActorID: r.Principal.UserID}, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &v, effect(api.EndpointVolumeCreate, v, evs), nil
	}, nil
}

func (h handlers) resize(ctx context.Context, r *endpoint.Request, req api.VolumeResizeRequest) (endpoint.Work[api.Volume], error) {
	size, err := api.ParseVolumeSize(req.Size)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Volume) == "" {
		return nil, noVolume()
	}
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Volume, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if cur, err := volumes.Get(ctx, tx, p.ID, req.Volume); err == nil && size > cur.SizeBytes {
			if err := h.requireFunds(ctx, tx, p, r.Principal.UserID, size-cur.SizeBytes); err != nil {
				return nil, mutate.Effect{}, err
			}
		}
		v, evs, err := volumes.Resize(ctx, tx, p.ID, req.Volume, size, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &v, effect(api.EndpointVolumeResize, v, evs), nil
	}, nil
}

func (h handlers) remove(ctx context.Context, r *endpoint.Request, req api.VolumeRef) (endpoint.Work[api.Volume], error) {
	if strings.TrimSpace(req.Volume) == "" {
		return nil, noVolume()
	}
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Volume, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		v, evs, err := volumes.Remove(ctx, tx, p.ID, req.Volume, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &v, effect(api.EndpointVolumeRemove, v, evs), nil
	}, nil
}

// effect is a volume change's audit row and its events.
func effect(action string, v api.Volume, evs []outbox.Event) mutate.Effect {
	return mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "volume", TargetID: v.ID, ProjectID: v.ProjectID,
			Detail: map[string]any{"name": v.Name, "node_id": v.NodeID, "size_bytes": v.SizeBytes,
				"resizing_to": v.ResizingTo, "state": v.State}},
		Events: evs,
	}
}

// readProject resolves the project of a read and checks that the caller
// may read it.
func (h handlers) readProject(ctx context.Context, r *endpoint.Request, ref string) (api.Project, error) {
	ref, err := project.Ref(ctx, h.DB, r, ref)
	if err != nil {
		return api.Project{}, err
	}
	return project.Authorize(ctx, h.DB, ref, r.Principal.UserID, r.Principal.Role, project.AccessRead)
}

func (h handlers) get(ctx context.Context, r *endpoint.Request, req api.VolumeRef) (*api.Volume, error) {
	p, err := h.readProject(ctx, r, req.Project)
	if err != nil {
		return nil, err
	}
	v, err := volumes.Get(ctx, h.DB, p.ID, strings.TrimSpace(req.Volume))
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.VolumeListRequest) (*api.VolumeList, error) {
	p, err := h.readProject(ctx, r, req.Project)
	if err != nil {
		return nil, err
	}
	vs, err := volumes.List(ctx, h.DB, p.ID, req.All)
	if err != nil {
		return nil, err
	}
	return &api.VolumeList{Volumes: vs}, nil
}

// requireFunds refuses a volume (or a volume's growth) of size bytes the
// project cannot pay for, as an allocation is refused: its balance must
// last the minimum runway at its burn with the volume's, within the
// budgets binding the user (alloc.RequireFunds; docs/volumes.md).
func (h handlers) requireFunds(ctx context.Context, tx pgx.Tx, p api.Project, userID string, size int64) error {
	perHour, currency, err := volumes.HourlyMinor(ctx, tx, size)
	if err != nil {
		return err
	}
	return alloc.RequireFunds(ctx, tx, alloc.Charge{ProjectID: p.ID, ProjectName: p.Name, UserID: userID,
		AddMinorPerHour: perHour, Currency: currency, What: "this volume"}, h.Rules(), h.Now())
}
