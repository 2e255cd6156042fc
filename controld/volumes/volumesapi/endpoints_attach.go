package volumesapi

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
)

// attach is `gpuaas volume attach NAME --alloc ID [--path P]`: a
// ready volume into a running allocation of its project on its node
// (controld/volumes hot.go; docs/volumes.md, "Attaching to a running
// allocation"). A depleted project is refused as at create.
func (h handlers) attach(ctx context.Context, r *endpoint.Request, req api.VolumeAttachRequest) (endpoint.Work[api.Volume], error) {
	if strings.TrimSpace(req.Volume) == "" {
		return nil, noVolume()
	}
	allocID := strings.TrimSpace(req.Allocation)
	if allocID == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which allocation? give --alloc ID").WithHint("see `gpuaas alloc list`")
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
		al, err := alloc.LockInProject(ctx, tx, p.ID, allocID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		// The volume is charged already: its project must still cover
		// the minimum runway at its burn, as an alloc create with it.
		if err := h.requireFunds(ctx, tx, p, r.Principal.UserID, 0); err != nil {
			return nil, mutate.Effect{}, err
		}
		v, evs, err := volumes.AttachRunning(ctx, tx, volumes.HotAttachArgs{ProjectID: p.ID, Volume: req.Volume,
			Alloc: al, Path: req.Path}, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff := effect(api.EndpointVolumeAttach, v, evs)
		d := eff.Audit.Detail.(map[string]any)
		d["allocation_id"], d["mount_path"] = v.AllocationID, v.MountPath
		return &v, eff, nil
	}, nil
}

// detach is `gpuaas volume detach NAME [--alloc ID]`: the volume
// out of the running allocation that has it, the allocation kept.
func (h handlers) detach(ctx context.Context, r *endpoint.Request, req api.VolumeDetachRequest) (endpoint.Work[api.Volume], error) {
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
		v, evs, err := volumes.DetachRunning(ctx, tx, p.ID, req.Volume, strings.TrimSpace(req.Allocation),
			func(id string) (api.Allocation, error) { return alloc.LockInProject(ctx, tx, p.ID, id) }, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		// The volume's row is locked now (an app.run that mounts it
		// waits, then sees it detaching): refusing here rolls the
		// detach back.
		if err := inUse(ctx, tx, v); err != nil {
			return nil, mutate.Effect{}, err
		}
		eff := effect(api.EndpointVolumeDetach, v, evs)
		d := eff.Audit.Detail.(map[string]any)
		d["allocation_id"], d["mount_path"] = v.AllocationID, v.MountPath
		return &v, eff, nil
	}, nil
}

// inUse refuses the detach of v, naming the user, while a container
// on its allocation holds it: a workload that has not ended and mounts it,
// or a job in an image that has not ended (hostd binds every mounted
// volume into it). The node's umount cannot see a container's bind mount,
// which keeps the filesystem alive (docs/decisions/0064-volume-attach-running.md).
func inUse(ctx context.Context, tx pgx.Tx, v api.Volume) error {
	w, err := workloads.MountingVolume(ctx, tx, v.AllocationID, v.ID)
	if err != nil {
		return err
	}
	if w != "" {
		return api.Errorf(api.CodeConflict, "volume %s is mounted in workload %s on allocation %s", v.Name, w, v.AllocationID).
			WithHint("stop it first: `gpuaas app stop " + w + "`")
	}
	j, err := jobs.RunningInImage(ctx, tx, v.AllocationID)
	if err != nil {
		return err
	}
	if j != "" {
		return api.Errorf(api.CodeConflict, "volume %s is bound into job %s, which runs in an image on allocation %s", v.Name, j, v.AllocationID).
			WithHint("wait for it to end, or `gpuaas job cancel " + j + "`")
	}
	return nil
}
