package tasks

import (
	"context"
	"os"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Config tunes how long the handlers wait for the host; the zero value
// means the defaults.
type Config struct {
	// ReadinessTimeout bounds the wait for a new VM's sshd; default 10m
	// (a VM with GPUs passed through takes minutes to boot).
	ReadinessTimeout time.Duration
	// ShutdownTimeout is how long a release waits for a graceful guest
	// shutdown when its params give none; default 60s.
	ShutdownTimeout time.Duration
	// PollInterval is how often domain state and sshd are polled; default
	// 250ms.
	PollInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.ReadinessTimeout <= 0 {
		c.ReadinessTimeout = 10 * time.Minute
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 60 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 250 * time.Millisecond
	}
	return c
}

// Default is the registry of every task type hostd runs, with the default
// Config.
func Default() Registry { return New(Config{}) }

// New is the registry of every task type hostd runs.
func New(cfg Config) Registry {
	cfg = cfg.withDefaults()
	return Registry{
		api.TaskHealthProbe:      Typed(healthProbe),
		api.TaskTopologyDiscover: Typed(topologyDiscover),
		api.TaskVMProvision:      Typed(cfg.vmProvision),
		api.TaskVMRelease:        Typed(cfg.vmRelease),
		api.TaskProvisionUser:    Typed(provisionUser),
		api.TaskDeprovisionUser:  Typed(deprovisionUser),
		api.TaskJobStart:         Typed(jobStart),
		api.TaskJobWait:          Typed(jobWait),
		api.TaskJobStop:          Typed(jobStop),
		api.TaskVolumeCreate:     Typed(volumeCreate),
		api.TaskVolumeResize:     Typed(volumeResize),
		api.TaskVolumeDelete:     Typed(volumeDelete),
		api.TaskVolumeAttach:     Typed(volumeHotAttach), // volume_hot.go
		api.TaskVolumeDetach:     Typed(volumeHotDetach),
		api.TaskWorkloadStart:    Typed(workloadStart),
		api.TaskWorkloadStop:     Typed(workloadStop),
		api.TaskWorkloadStatus:   Typed(workloadStatus),
	}
}

// poll calls check every interval until it reports done, returns an
// error, or ctx ends.
func poll(ctx context.Context, interval time.Duration, check func() (done bool, err error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := check()
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// removeIfExists removes a file or an empty directory; a missing one is
// not an error.
func removeIfExists(name string) error {
	if err := os.Remove(name); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
