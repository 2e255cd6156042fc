package alloc

import (
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// parseVolumeFlags reads --volume NAME[:/path] into opts.Volumes
// (docs/volumes.md): a path that cannot be a mount point is a usage
// error, before anything is sent.
func parseVolumeFlags(opts *CreateOptions) error {
	opts.Volumes = nil
	for _, f := range opts.volumeFlags {
		m, err := api.ParseVolumeMount(f)
		if err != nil {
			return cmdutil.FlagErrorf("--volume: %v", err)
		}
		opts.Volumes = append(opts.Volumes, m)
	}
	return nil
}
