package job

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/jobspec"
)

// checkJobVolumes checks job.yaml's volumes (docs/jobs.md, "Volumes")
// before anything is created or started. With resources.sku they go in
// the alloc.create request (as `alloc create --volume`), which places the
// allocation on their node and mounts them; a request waiting in line
// cannot have them (the queue is one line per SKU). With
// resources.allocation each must be attached to that allocation already,
// at the path job.yaml says: a job cannot attach a volume to a running
// allocation, and one that is not there would leave the job writing to
// the node's own disk.
func checkJobVolumes(ctx context.Context, client *api.Client, allocID string, vols []api.VolumeMount, queue bool) error {
	if len(vols) == 0 {
		return nil
	}
	if queue {
		return cmdutil.FlagErrorWrap(&jobspec.Error{Field: "volumes", Reason: "cannot be used with --queue: " +
			"an allocation with volumes is placed on their node now, never waits in line"})
	}
	if allocID == "" {
		return nil
	}
	a, err := client.AllocGet(ctx, allocID)
	if err != nil {
		return fmt.Errorf("resources.allocation: %w", err)
	}
	for i, m := range vols {
		field := fmt.Sprintf("volumes[%d]", i)
		v, err := client.VolumeGet(ctx, api.VolumeRef{Project: a.ProjectID, Volume: m.Volume})
		if err != nil {
			return fmt.Errorf("job.yaml: %s: %w", field, err)
		}
		if err := attachedAt(a.ID, m, v); err != nil {
			return cmdutil.FlagErrorWrap(&jobspec.Error{Field: field, Reason: err.Error()})
		}
	}
	return nil
}

// attachedAt refuses a volume that is not attached to allocation allocID
// at the path m asks (its default /data/NAME when none), saying where it
// is instead.
func attachedAt(allocID string, m api.VolumeMount, v *api.Volume) error {
	path := m.Path
	if path == "" {
		path = api.DefaultMountPath(v.Name)
	}
	switch {
	case v.AllocationID == allocID && v.MountPath == path:
		return nil
	case v.AllocationID == allocID:
		return fmt.Errorf("volume %s is attached to allocation %s at %s, not at %s", v.Name, allocID, v.MountPath, path)
	case v.AllocationID != "":
		return fmt.Errorf("volume %s is attached to another allocation, %s, not to %s", v.Name, v.AllocationID, allocID)
	case v.Session != nil:
		return fmt.Errorf("volume %s is open in an sftp session, not attached to allocation %s", v.Name, allocID)
	}
	return fmt.Errorf("volume %s is %s, not attached to allocation %s: a volume is attached when its allocation is created "+
		"(`gpuaas alloc create --volume %s`, or resources.sku in job.yaml)", v.Name, v.State, allocID, m.Volume)
}
