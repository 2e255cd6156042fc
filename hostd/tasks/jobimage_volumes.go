package tasks

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/hostd/workload"
)

// jobVolumeBinds are the bind mounts of each volume mounted for the
// allocation's user into a job's container at the same path as on the
// node (docs/jobs.md, "Images"): a job in an image reads and writes its
// volumes where it would without one — at their paths and through the
// ~/NAME links in the home, which the container shares. Without them a
// write under a volume's path lands in the container's own layer and
// goes with it at the job's end.
func jobVolumeBinds(ctx context.Context, env *Env, posixUser string) ([]workload.BindMount, error) {
	ids, err := mountedFor(ctx, env, posixUser)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	binds := make([]workload.BindMount, 0, len(ids))
	for _, id := range ids {
		info, err := env.Volumes.Stat(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", id, err)
		}
		if info.MountPoint == "" {
			continue // unmounted since it was listed
		}
		binds = append(binds, workload.BindMount{Source: info.MountPoint, Target: info.MountPoint})
	}
	return binds, nil
}
