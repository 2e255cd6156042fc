package alloc

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// volumesStaying is what `alloc release` says of the volumes attached to
// allocation id (docs/volumes.md, "Attached to an allocation"): a release
// detaches them and keeps them, so it names each, where it stays and that
// it is still charged. It is read before the release (which detaches
// them); "" when none is attached or they cannot be listed — the release
// goes ahead regardless.
func volumesStaying(ctx context.Context, client *api.Client, id string) string {
	a, err := client.AllocGet(ctx, id)
	if err != nil {
		return ""
	}
	list, err := client.VolumeList(ctx, api.VolumeListRequest{Project: a.ProjectID})
	if err != nil {
		return ""
	}
	var lines []string
	for _, v := range list.Volumes {
		if v.AllocationID == id {
			lines = append(lines, fmt.Sprintf("Volume %s (%s) at %s stays on node %s: detached and kept, still charged by the GiB-hour (`gpuaas volume rm %s` deletes it)",
				v.Name, v.ID, v.MountPath, v.Node, v.Name))
		}
	}
	return strings.Join(lines, "\n")
}
