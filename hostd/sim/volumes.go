package sim

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/gpuaas/gpuaas/hostd/volume"
)

// simVolumes are the volume stores of sim hosts by state directory: one
// per host, however many Envs it hands out.
var simVolumes sync.Map

// volumeStore is the host's volumes: real ext4 images under its state
// directory (hostd/volume), which need root; nil otherwise, and the
// volume tasks then fail with tasks.ErrNoVolumes.
func (h *Host) volumeStore(log *slog.Logger) volume.Store {
	if os.Geteuid() != 0 {
		return nil
	}
	if s, ok := simVolumes.Load(h.StateDir); ok {
		return s.(volume.Store)
	}
	s, err := volume.New(volume.Config{Dir: filepath.Join(h.StateDir, "volumes"), Log: log})
	if err != nil {
		log.Warn("sim host keeps no volumes", "err", err)
		return nil
	}
	actual, _ := simVolumes.LoadOrStore(h.StateDir, s)
	return actual.(volume.Store)
}
