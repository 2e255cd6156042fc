package tasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// ErrVolumeNotAttached is a workload.start naming a volume that is not
// mounted on this node for the allocation's user.
var ErrVolumeNotAttached = errors.New("volume not attached to the allocation")

// workloadBinds resolves workload.start's mounts (docs/apps.md, "Volumes
// in a container") into the directories the container binds: for each
// volume id, its mount point on this node, as hostd's own volume store
// reports it, which must be the allocation user's (volume.Store.Mount
// gave its root to that uid when the allocation was provisioned). No
// path on the node comes from the task: a volume that is not mounted, or
// is mounted for someone else, refuses the start and nothing runs. In a
// slice's guest the volume is the VM's disk, not a mount of the node:
// refused (controld refuses it first).
func workloadBinds(ctx context.Context, env *Env, pm workload.Podman, p hostproto.WorkloadStartParams) ([]workload.BindMount, error) {
	if len(p.Mounts) == 0 {
		return nil, nil
	}
	if len(p.Mounts) > api.MaxWorkloadMounts {
		return nil, fmt.Errorf("%w: %d mounts; at most %d", ErrInvalidParams, len(p.Mounts), api.MaxWorkloadMounts)
	}
	for _, m := range p.Mounts {
		if err := errors.Join(volume.CheckID(m.VolumeID), api.CheckContainerPath(m.Path)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
		}
	}
	if workload.InGuest(pm.Env) {
		return nil, fmt.Errorf("%w: volumes in a slice's containers are not supported", ErrInvalidParams)
	}
	if env.Volumes == nil {
		return nil, ErrNoVolumes
	}
	ids, err := lookupPosix(p.PosixUser)
	if err != nil {
		return nil, fmt.Errorf("workload %s volumes: %w", p.WorkloadID, err)
	}
	out := make([]workload.BindMount, 0, len(p.Mounts))
	for _, m := range p.Mounts {
		info, err := env.Volumes.Stat(ctx, m.VolumeID)
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
		}
		if info.MountPoint == "" {
			return nil, fmt.Errorf("%w: volume %s is not mounted on this node", ErrVolumeNotAttached, m.VolumeID)
		}
		fi, err := os.Lstat(info.MountPoint)
		if err != nil {
			return nil, fmt.Errorf("workload %s: volume %s: %w", p.WorkloadID, m.VolumeID, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || !fi.IsDir() || int(st.Uid) != ids.uid {
			return nil, fmt.Errorf("%w: volume %s is not mounted for %s", ErrVolumeNotAttached, m.VolumeID, p.PosixUser)
		}
		out = append(out, workload.BindMount{Source: info.MountPoint, Target: m.Path, ReadOnly: m.ReadOnly})
	}
	return out, nil
}
