package workloads

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// workloadMounts checks an app.run's mounts (docs/apps.md, "Volumes in a
// container") and names each volume by id for workload.start: every
// volume, by name or id in the allocation's project, must be attached to
// this allocation (alloc create --volume), since the container binds the
// volume's mount point on the node. Refused naming mounts[i] and nothing
// written: a volume of another allocation, a ready one, one still being
// attached or being detached, a path twice. The volume's row is
// share-locked, so a concurrent detach sees this workload. On
// a slice the volume is the guest's disk, which hostd does not bind into
// the guest's containers: refused.
func workloadMounts(ctx context.Context, tx pgx.Tx, a api.Allocation, req api.AppRunRequest) ([]api.WorkloadMount, error) {
	if len(req.Mounts) == 0 {
		return nil, nil
	}
	if len(req.Mounts) > api.MaxWorkloadMounts {
		return nil, bad("mounts", "%d volumes; at most %d", len(req.Mounts), api.MaxWorkloadMounts)
	}
	if !api.BindsVolumes(a.Shape) {
		return nil, bad("mounts", "allocation %s is a %s: volumes in containers are bound on bare-metal allocations only "+
			"(in a slice, the guest mounts the volume at its path: run the container there with `podman run -v`)", a.ID, a.Shape)
	}
	out := make([]api.WorkloadMount, 0, len(req.Mounts))
	for i, m := range req.Mounts {
		field := fmt.Sprintf("mounts[%d]", i)
		if err := api.CheckContainerPath(m.Path); err != nil {
			return nil, bad(field+".path", "%s", err.Error())
		}
		if slices.ContainsFunc(req.Mounts[:i], func(o api.AppMount) bool { return o.Path == m.Path }) {
			return nil, bad(field+".path", "%s is mounted twice", m.Path)
		}
		if m.Volume == "" {
			return nil, bad(field+".volume", "required: a volume attached to allocation %s", a.ID)
		}
		v, err := volumes.GetForShare(ctx, tx, a.ProjectID, m.Volume)
		if ae := (*api.Error)(nil); errors.As(err, &ae) {
			return nil, api.Errorf(ae.Code, "%s.volume: %s", field, ae.Message).WithHint(ae.Hint)
		}
		if err != nil {
			return nil, err
		}
		if v.AllocationID != a.ID {
			where := "is " + v.State
			if v.AllocationID != "" {
				where = "is attached to another allocation"
			}
			return nil, api.Errorf(api.CodeInvalidArgument, "%s.volume: volume %s %s, not attached to allocation %s", field, v.Name, where, a.ID).
				WithHint("a volume is attached when its allocation is created: `gpuaas alloc create --volume " + v.Name + "`")
		}
		if v.State != api.VolumeAttached {
			// Being attached, the node has not mounted it yet; being
			// detached, it is going away (docs/decisions/0064-volume-attach-running.md).
			return nil, api.Errorf(api.CodeConflict, "%s.volume: volume %s is %s allocation %s: a container binds an attached volume",
				field, v.Name, volumeHeld(v.State), a.ID).WithHint("wait until `gpuaas volume get " + v.Name + "` says attached")
		}
		if slices.ContainsFunc(out, func(o api.WorkloadMount) bool { return o.VolumeID == v.ID }) {
			return nil, bad(field+".volume", "volume %s is mounted twice", v.Name)
		}
		out = append(out, api.WorkloadMount{VolumeID: v.ID, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return out, nil
}

// volumeHeld says how an allocation holds a volume in state.
func volumeHeld(state string) string {
	switch state {
	case api.VolumeAttaching:
		return "being attached to"
	case api.VolumeDetaching:
		return "being detached from"
	}
	return state + " in"
}
