package daemon

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/gpuaas/gpuaas/hostd/volume"
)

// nodeVolumes is a real node's volume store: ext4 images under the state
// directory (docs/volumes.md), or logical volumes of volumeGroup when the
// operator names one (docs/decisions/0063-volumes-on-lvm.md). Without a
// group, a store that cannot be made is nil, with a warning, and the node
// takes no volume tasks; a named group that cannot be used stops hostd,
// as the operator asked for it.
func nodeVolumes(stateDir, volumeGroup string, log *slog.Logger) (volume.Store, error) {
	s, err := volume.New(volume.Config{Dir: filepath.Join(stateDir, "volumes"), VolumeGroup: volumeGroup, Log: log})
	switch {
	case err != nil && volumeGroup != "":
		return nil, fmt.Errorf("--volume-group %s: %w", volumeGroup, err)
	case err != nil:
		log.Warn("this node keeps no volumes", "err", err)
		return nil, nil
	}
	return s, nil
}
