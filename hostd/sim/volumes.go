package sim

import (
	"crypto/sha256"
	"encoding/hex"
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

// volumeRoot is where the host's volumes are mounted: a directory of its
// own under /run (traversable by its users, unlike its state directory),
// so that sim hosts sharing a machine never mount over each other's
// /data/<name>.
func (h *Host) volumeRoot() string {
	sum := sha256.Sum256([]byte(h.StateDir))
	return filepath.Join("/run/gpuaas-sim", hex.EncodeToString(sum[:6]))
}
