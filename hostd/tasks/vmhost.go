package tasks

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// SliceHost is how this node runs real slice guests, beyond their network
// (SliceNet): whether guests are emulated, whether devices are passed
// through, and what the node was found to lack at start. Env.SliceHost
// nil is the sim's and a GPU node's default: KVM, passthrough, nothing
// found missing.
type SliceHost struct {
	// Emulate runs guests under QEMU's software emulation (TCG): a node
	// without a usable KVM (docs/slices.md, "emulated guests"). It is a
	// development and test setting; timings are not production timings.
	Emulate bool
	// NoPassthrough, when set, is why this node passes no device through
	// (no IOMMU, a development machine): vm_provision skips the VFIO
	// check with this reason and gives the guest no hostdev and no NVMe
	// namespace. "" passes the slots' GPUs, VFs and namespaces through.
	NoPassthrough string
	// Blockers are what hostd found missing for slices at start (the
	// slice network, nftables, libvirt); slice topology discovery reports
	// them with the hardware's own.
	Blockers []api.Blocker
}

// BlockerSliceNetwork is the blocker code of a node whose slices'
// isolated network could not be set up (docs/slices.md).
const BlockerSliceNetwork api.BlockerCode = "slice_network"

// noPassthrough is why env's node passes no device through; "" when it does.
func noPassthrough(env *Env) string {
	if env.SliceHost == nil {
		return ""
	}
	return env.SliceHost.NoPassthrough
}

// emulated says whether env's guests run under TCG.
func emulated(env *Env) bool { return env.SliceHost != nil && env.SliceHost.Emulate }

// sliceHostBlockers are the blockers hostd found at start, for a slice
// topology report.
func sliceHostBlockers(env *Env, shape string) []api.Blocker {
	if env.SliceHost == nil || shape != api.ShapeGPUSlice {
		return nil
	}
	return env.SliceHost.Blockers
}

// skipPhase reports phase done without running it, with why as the
// phase's message (the task's record keeps it).
func skipPhase(rep Reporter, phase, why string) {
	rep.Progress(phase, api.PhaseDone, 0, "skipped: "+why)
}

// ErrSliceHostBlocked is vm_provision's answer on a node that found at
// start that it cannot run slices (SliceHost.Blockers): fail closed.
var ErrSliceHostBlocked = errors.New("node cannot run slice VMs")

// sliceHostReady fails while the node reports a blocker of its own.
func sliceHostReady(env *Env) error {
	if env.SliceHost == nil || len(env.SliceHost.Blockers) == 0 {
		return nil
	}
	msgs := make([]string, len(env.SliceHost.Blockers))
	for i, b := range env.SliceHost.Blockers {
		msgs[i] = b.Message
	}
	return fmt.Errorf("%w: %s", ErrSliceHostBlocked, strings.Join(msgs, "; "))
}

// guestDirs makes dirs (each below the one before, the last deepest)
// traversable by QEMU, which libvirt runs as its own user (libvirt-qemu
// on Debian) and which must reach the overlay, the seed ISO and the
// serial log: mode 0711, searchable but not listable; the files keep
// their own modes (libvirt's dynamic ownership hands the disks to QEMU).
// Directories made 0700 by an earlier hostd are opened up the same way.
func guestDirs(dirs ...string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	return nil
}
