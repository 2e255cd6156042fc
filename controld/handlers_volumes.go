package controld

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// volumeEndpoints are projects' persistent volumes (controld/volumes,
// docs/volumes.md): members make, grow and remove them, viewers read.
func (s *Server) volumeEndpoints() []endpointDef {
	return []endpointDef{
		refusalAuditedMutation(s, api.OpVolumeCreate, s.volumeCreate, s.auditFundsRefusal("volume.create_refused")),
		query(s, api.OpVolumeGet, s.volumeGet),
		query(s, api.OpVolumeList, s.volumeList),
		refusalAuditedMutation(s, api.OpVolumeResize, s.volumeResize, s.auditFundsRefusal("volume.resize_refused")),
		mutation(s, api.OpVolumeRemove, s.volumeRemove),
		refusalAuditedMutation(s, api.OpVolumeAttach, s.volumeAttach, s.auditFundsRefusal("volume.attach_refused")), // handlers_volattach.go
		mutation(s, api.OpVolumeDetach, s.volumeDetach),
		query(s, api.OpVolumeQuote, s.volumeQuote),
		query(s, gateproto.OpGateVolumeEnd, s.gateVolumeEnd),          // sftp to a volume: handlers_volsession.go
		mutation(s, api.OpAdminVolumePriceSet, s.adminVolumePriceSet), // handlers_volumeprice.go
	}
}

// volumeQuote is `volume create --dry-run`: the create's checks and its
// price, with the member's right to create, changing nothing.
func (s *Server) volumeQuote(ctx context.Context, c *call, req api.VolumeCreateRequest) (*api.VolumeQuote, error) {
	if err := api.CheckVolumeName(req.Name); err != nil {
		return nil, err
	}
	size, err := api.ParseVolumeSize(req.Size)
	if err != nil {
		return nil, err
	}
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	p, err := project.Authorize(ctx, s.pool, ref, c.principal.UserID, c.principal.Role, project.AccessWrite)
	if err != nil {
		return nil, err
	}
	q, err := s.quoteVolume(ctx, p, c.principal.UserID, volumes.CreateArgs{ProjectID: p.ID, Name: req.Name, SizeBytes: size,
		Node: strings.TrimSpace(req.Node), ActorID: c.principal.UserID})
	if err != nil {
		return nil, err
	}
	return &q, nil
}

func (s *Server) volumeCreate(ctx context.Context, c *call, req api.VolumeCreateRequest) (work[api.Volume], error) {
	if err := api.CheckVolumeName(req.Name); err != nil {
		return nil, err
	}
	size, err := api.ParseVolumeSize(req.Size)
	if err != nil {
		return nil, err
	}
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Volume, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, c.principal.UserID, c.principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := s.requireVolumeFunds(ctx, tx, p, c.principal.UserID, size); err != nil {
			return nil, mutate.Effect{}, err
		}
		v, evs, err := volumes.Create(ctx, tx, volumes.CreateArgs{ProjectID: p.ID, Name: req.Name, SizeBytes: size,
			Node: strings.TrimSpace(req.Node), ActorID: c.principal.UserID}, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &v, volumeEffect(api.EndpointVolumeCreate, v, evs), nil
	}, nil
}

func (s *Server) volumeResize(ctx context.Context, c *call, req api.VolumeResizeRequest) (work[api.Volume], error) {
	size, err := api.ParseVolumeSize(req.Size)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Volume) == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which volume? name one").WithHint("see `gpuaas volume list`")
	}
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Volume, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, c.principal.UserID, c.principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if cur, err := volumes.Get(ctx, tx, p.ID, req.Volume); err == nil && size > cur.SizeBytes {
			if err := s.requireVolumeFunds(ctx, tx, p, c.principal.UserID, size-cur.SizeBytes); err != nil {
				return nil, mutate.Effect{}, err
			}
		}
		v, evs, err := volumes.Resize(ctx, tx, p.ID, req.Volume, size, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &v, volumeEffect(api.EndpointVolumeResize, v, evs), nil
	}, nil
}

func (s *Server) volumeRemove(ctx context.Context, c *call, req api.VolumeRef) (work[api.Volume], error) {
	if strings.TrimSpace(req.Volume) == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which volume? name one").WithHint("see `gpuaas volume list`")
	}
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Volume, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, c.principal.UserID, c.principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		v, evs, err := volumes.Remove(ctx, tx, p.ID, req.Volume, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &v, volumeEffect(api.EndpointVolumeRemove, v, evs), nil
	}, nil
}

// volumeEffect is a volume change's audit row and its events.
func volumeEffect(action string, v api.Volume, evs []outbox.Event) mutate.Effect {
	return mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "volume", TargetID: v.ID, ProjectID: v.ProjectID,
			Detail: map[string]any{"name": v.Name, "node_id": v.NodeID, "size_bytes": v.SizeBytes,
				"resizing_to": v.ResizingTo, "state": v.State}},
		Events: evs,
	}
}

func (s *Server) volumeGet(ctx context.Context, c *call, req api.VolumeRef) (*api.Volume, error) {
	p, err := s.billingProject(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	v, err := volumes.Get(ctx, s.pool, p.ID, strings.TrimSpace(req.Volume))
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func (s *Server) volumeList(ctx context.Context, c *call, req api.VolumeListRequest) (*api.VolumeList, error) {
	p, err := s.billingProject(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	vs, err := volumes.List(ctx, s.pool, p.ID, req.All)
	if err != nil {
		return nil, err
	}
	return &api.VolumeList{Volumes: vs}, nil
}

// requireVolumeFunds refuses a volume (or a volume's growth) of size bytes
// the project cannot pay for, as an allocation is refused: its balance
// must last the minimum runway at its burn with the volume's, within the
// budgets binding the user (alloc.RequireFunds; docs/volumes.md).
func (s *Server) requireVolumeFunds(ctx context.Context, tx pgx.Tx, p api.Project, userID string, size int64) error {
	perHour, currency, err := volumes.HourlyMinor(ctx, tx, size)
	if err != nil {
		return err
	}
	return alloc.RequireFunds(ctx, tx, alloc.Charge{ProjectID: p.ID, ProjectName: p.Name, UserID: userID,
		AddMinorPerHour: perHour, Currency: currency, What: "this volume"}, s.allocRules(), s.now())
}
