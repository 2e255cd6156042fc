package daemon

import (
	"log/slog"
	"path/filepath"

	"github.com/gpuaas/gpuaas/hostd/volume"
)

// nodeVolumes is a real node's volume store: ext4 images under the state
// directory (docs/volumes.md); nil, with a warning, when it cannot be
// made, and the node then takes no volume tasks.
func nodeVolumes(stateDir string, log *slog.Logger) volume.Store {
	s, err := volume.New(volume.Config{Dir: filepath.Join(stateDir, "volumes"), Log: log})
	if err != nil {
		log.Warn("this node keeps no volumes", "err", err)
		return nil
	}
	return s
}
