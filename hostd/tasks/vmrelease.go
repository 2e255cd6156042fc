package tasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Phases of slice.vm_release, in order; destroy runs only when the guest
// did not power off in time, wipe only when asked.
const (
	PhaseShutdown      = "shutdown"
	PhaseDestroy       = "destroy"
	PhaseUndefine      = "undefine"
	PhaseRebind        = "rebind"
	PhaseWipe          = "wipe"
	PhaseReleaseLeases = "release_leases"
)

// VMReleaseResult is what slice.vm_release reports.
type VMReleaseResult struct {
	Domain string `json:"domain"`
	// Found is false when no domain was defined: released before, or a
	// provisioning that never got as far as defining it.
	Found bool `json:"found"`
	// HardStopped is set when the guest had to be destroyed.
	HardStopped bool `json:"hard_stopped,omitempty"`
	// NotVFIOBound lists passthrough devices no longer bound to vfio-pci
	// (with what they are bound to): the host's discovery will block them
	// until an operator rebinds them.
	NotVFIOBound []string `json:"not_vfio_bound,omitempty"`
	// Wiped lists the NVMe namespaces discarded.
	Wiped []string `json:"wiped,omitempty"`
	// VolumesReturned lists the volumes the VM had as disks, handed back
	// to the node once the domain was gone (vmprovision_volumes.go).
	VolumesReturned []string `json:"volumes_returned,omitempty"`
}

// vmRelease stops and removes a slice VM and everything provisioning made
// for it. Every step tolerates what is missing, so a release is
// idempotent and also serves as the cleanup after a failed or interrupted
// provisioning (params.Cleanup); nothing missing is an error in either
// case.
func (c Config) vmRelease(ctx context.Context, env *Env, p hostproto.VMReleaseParams, rep Reporter) (any, error) {
	if err := checkAllocationID(p.AllocationID); err != nil {
		return nil, err
	}
	if err := checkSlots(p.Slots); err != nil {
		return nil, err
	}
	name := p.AllocationID
	paths := PathsFor(env.StateDir, name)
	res := VMReleaseResult{Domain: name}
	ph := NewPhased(env, rep)
	timeout := p.ShutdownTimeout
	if timeout <= 0 {
		timeout = c.ShutdownTimeout
	}

	if !p.Cleanup {
		releaseGuestWorkloads(ctx, env, name) // workload_guest.go
	}
	var state host.DomainState
	err := ph.Run(ctx, PhaseShutdown, func(ctx context.Context) error {
		var err error
		state, err = c.shutdown(ctx, env, name, timeout)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	res.Found = state != host.DomainNotFound

	if state != host.DomainNotFound && state != host.DomainShutoff {
		res.HardStopped = true
		if env.HardStop != nil {
			env.HardStop()
		}
		err = ph.Run(ctx, PhaseDestroy, func(ctx context.Context) error {
			if err := env.Hypervisor.Destroy(ctx, name); err != nil && !errors.Is(err, host.ErrDomainNotFound) {
				return err
			}
			return nil
		}, nil)
		if err != nil {
			return nil, err
		}
	}

	err = ph.Run(ctx, PhaseUndefine, func(ctx context.Context) error {
		if err := env.Hypervisor.Undefine(ctx, name); err != nil && !errors.Is(err, host.ErrDomainNotFound) {
			return err
		}
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}

	// The domain is gone: its guest has no volume mounted any more, and
	// the host may check or mount them again.
	if err := returnVolumesPhase(ctx, env, ph, name, &res); err != nil {
		return nil, err
	}

	// A node without passthrough handed the guest no device: nothing to
	// rebind or wipe (vmhost.go).
	if why := noPassthrough(env); why != "" {
		skipPhase(rep, PhaseRebind, why)
		if p.Wipe {
			skipPhase(rep, PhaseWipe, why)
		}
		p.Wipe = false
	} else {
		err = ph.Run(ctx, PhaseRebind, func(context.Context) error {
			res.NotVFIOBound = rebindReport(env, p.Slots)
			if len(res.NotVFIOBound) > 0 {
				env.Log.Warn("devices not bound to vfio-pci after release", "allocation", name,
					"devices", strings.Join(res.NotVFIOBound, ", "))
			}
			return nil
		}, nil)
	}
	if err != nil {
		return nil, err
	}

	if p.Wipe {
		err = ph.Run(ctx, PhaseWipe, func(ctx context.Context) error {
			var err error
			res.Wiped, err = wipe(ctx, env, name, p.Slots)
			return err
		}, nil)
		if err != nil {
			return nil, err
		}
	}

	err = ph.Run(ctx, PhaseReleaseLeases, func(ctx context.Context) error {
		// The lease goes last: while anything else is left, the devices
		// stay guarded.
		var unpin error
		if len(p.Slots) > 0 {
			unpin = releaseSlicePort(ctx, env, p.Slots[0].MAC)
		}
		return errors.Join(unpin, os.RemoveAll(paths.SeedDir), removeIfExists(paths.VMKey),
			removeIfExists(paths.VMKeyPub), removeIfExists(paths.Overlay),
			hostenv.ForgetVM(env.StateDir, name), removeLease(paths.Lease))
	}, nil)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// shutdown asks a running guest to power off and waits up to timeout for
// it; it returns the state the domain is left in. A guest that ignores
// the request is left running for destroy.
func (c Config) shutdown(ctx context.Context, env *Env, name string, timeout time.Duration) (host.DomainState, error) {
	st, err := env.Hypervisor.State(ctx, name)
	if err != nil || st != host.DomainRunning {
		return st, err
	}
	if err := env.Hypervisor.Shutdown(ctx, name); errors.Is(err, host.ErrDomainNotFound) {
		return host.DomainNotFound, nil
	} else if err != nil {
		env.Log.Warn("graceful shutdown refused; destroying", "domain", name, "err", err)
		return st, nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = poll(wctx, c.PollInterval, func() (bool, error) {
		var err error
		st, err = env.Hypervisor.State(ctx, name)
		return st != host.DomainRunning, err
	})
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		env.Log.Warn("guest did not power off in time; destroying", "domain", name, "timeout", timeout)
		return st, nil
	}
	return st, err
}

// rebindReport lists the passthrough devices that are not on vfio-pci.
// hostd does not rebind drivers itself: a device that left vfio-pci did so
// through something an operator should look at.
func rebindReport(env *Env, slots []api.Slot) []string {
	var out []string
	for _, pci := range passthroughDevices(slots) {
		drv, err := driverOf(env, pci)
		switch {
		case err != nil:
			out = append(out, pci+" (missing)")
		case drv == "":
			out = append(out, pci+" (no driver)")
		case drv != "vfio-pci":
			out = append(out, pci+" ("+drv+")")
		}
	}
	return out
}

// wipe discards every NVMe namespace of the slots, refusing one that is
// leased to another allocation: its data is someone else's now.
func wipe(ctx context.Context, env *Env, alloc string, slots []api.Slot) ([]string, error) {
	leaseMu.Lock()
	held, err := leasedDevices(filepath.Join(env.StateDir, "leases"))
	leaseMu.Unlock()
	if err != nil {
		return nil, err
	}
	var wiped []string
	for _, s := range slots {
		if s.NVMe == "" {
			continue
		}
		if owner, ok := held[s.NVMe]; ok && owner != alloc {
			return wiped, fmt.Errorf("%w: not wiping %s (leased to %s)", ErrDeviceLeased, s.NVMe, owner)
		}
		if _, err := env.Runner.Run(ctx, "blkdiscard", "-f", s.NVMe); err != nil {
			return wiped, fmt.Errorf("wipe %s: %w", s.NVMe, err)
		}
		wiped = append(wiped, s.NVMe)
	}
	return wiped, nil
}

// removeLease removes a lease file under leaseMu, so a provisioning
// checking leases sees it either present or gone.
func removeLease(name string) error {
	leaseMu.Lock()
	defer leaseMu.Unlock()
	return removeIfExists(name)
}
