package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Volumes of a slice (docs/decisions/0030-volumes-in-slices.md): each is
// lent to the VM (hostd/volume Lender: the host never mounts it while the
// guest has it), handed to it as a raw virtio disk whose serial is the
// volume id, and listed in the seed's meta-data so the guest mounts it at
// its path. Release returns them once the domain is gone.
const (
	// PhaseVolumeLend checks and lends the volumes; it runs only when the
	// allocation has volumes (not in ProvisionPhases).
	PhaseVolumeLend = "volume_lend"
	// PhaseVolumeReturn hands the volumes back after the domain is gone;
	// it runs only when the allocation had volumes.
	PhaseVolumeReturn = "volume_return"
)

// maxSerial is virtio-blk's serial length (VIRTIO_BLK_ID_BYTES): a longer
// volume id would reach the guest cut short.
const maxSerial = 20

// lentVolume is a volume lent to the VM: its attachment and image file.
type lentVolume struct {
	api.VolumeAttachment
	Image string
}

// checkVMVolumes validates the volumes of a vm_provision: ids fit a disk
// serial, names and paths are volumes', none twice.
func checkVMVolumes(vols []api.VolumeAttachment) error {
	ids, paths := map[string]bool{}, map[string]bool{}
	for _, v := range vols {
		err := errors.Join(volume.CheckID(v.VolumeID), api.CheckVolumeName(v.Name), api.CheckMountPath(v.Path))
		if err == nil && len(v.VolumeID) > maxSerial {
			err = fmt.Errorf("volume id %q is longer than a disk serial (%d bytes)", v.VolumeID, maxSerial)
		}
		if err == nil && (ids[v.VolumeID] || paths[v.Path]) {
			err = fmt.Errorf("volume %s or path %s given twice", v.VolumeID, v.Path)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidParams, err)
		}
		ids[v.VolumeID], paths[v.Path] = true, true
	}
	return nil
}

// lender is env's volume store as a Lender, or why the node cannot lend.
func lender(env *Env) (volume.Lender, error) {
	if env.Volumes == nil {
		return nil, ErrNoVolumes
	}
	l, ok := env.Volumes.(volume.Lender)
	if !ok {
		return nil, fmt.Errorf("%w: this node's volume store cannot hand a volume to a VM", ErrNoVolumes)
	}
	return l, nil
}

// lendVolumes lends each of vols to allocation alloc.
func lendVolumes(ctx context.Context, env *Env, alloc string, vols []api.VolumeAttachment) ([]lentVolume, error) {
	l, err := lender(env)
	if err != nil {
		return nil, err
	}
	out := make([]lentVolume, 0, len(vols))
	for _, v := range vols {
		img, err := l.Lend(ctx, v.VolumeID, alloc)
		if err != nil {
			return nil, err
		}
		out = append(out, lentVolume{VolumeAttachment: v, Image: img})
	}
	return out, nil
}

// returnVolumes returns every volume lent to allocation alloc: the
// release's phase and the lend's undo. A node that keeps no volumes lent
// none.
func returnVolumes(ctx context.Context, env *Env, alloc string) ([]string, error) {
	l, err := lender(env)
	if err != nil {
		return nil, nil
	}
	ids, err := l.LentTo(ctx, alloc)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := l.Return(ctx, id, alloc); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// volumeDisks are the VM's disks of the lent volumes, after the n disks
// it has.
func volumeDisks(vols []lentVolume, n int) []host.Disk {
	var out []host.Disk
	for i, v := range vols {
		out = append(out, host.Disk{Source: v.Image, Target: diskTarget(n + i), Raw: true, Serial: v.VolumeID})
	}
	return out
}

// returnVolumesPhase runs PhaseVolumeReturn when volumes are lent to
// allocation alloc, recording them in res.
func returnVolumesPhase(ctx context.Context, env *Env, ph *Phased, alloc string, res *VMReleaseResult) error {
	l, err := lender(env)
	if err != nil {
		return nil
	}
	ids, err := l.LentTo(ctx, alloc)
	if err != nil || len(ids) == 0 {
		return err
	}
	return ph.Run(ctx, PhaseVolumeReturn, func(ctx context.Context) error {
		var err error
		res.VolumesReturned, err = returnVolumes(ctx, env, alloc)
		return err
	}, nil)
}

// sliceVolumes says whether this node's slices can take volumes: it
// keeps volumes it can lend, and its slices are real VMs (the sim's
// guests, Addressers, are SSH servers on loopback with no disk to mount)
// on a slice host nothing blocks.
func sliceVolumes(env *Env) bool {
	if _, err := lender(env); err != nil || env.Hypervisor == nil || env.SliceHost == nil {
		return false
	}
	if _, sim := env.Hypervisor.(Addresser); sim {
		return false
	}
	return sliceHostReady(env) == nil
}
