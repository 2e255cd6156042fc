package tasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/mountinfo"
)

// Attaching a volume to a running allocation and detaching it without a
// release (docs/volumes.md, "Attaching to a running allocation";
// docs/decisions/0064-volume-attach-running.md), through the allocation's
// Environment: on bare metal the volume is mounted for the allocation's
// user as at provisioning (e2fsck first, nodev,nosuid, its files given to
// the user, ~/NAME linked); a slice's VM gets it hot-plugged
// (hostd/env vm_attach.go), lent as at provisioning. A volume in use is
// never detached: no lazy unmount leaves it reachable.

// busyError is a detach refused because something uses the volume.
type busyError struct {
	name, alloc, path, detail string
}

func (e *busyError) Error() string {
	msg := fmt.Sprintf("volume %s is busy on %s: close what uses %s", e.name, e.alloc, e.path)
	if e.detail != "" {
		msg += " (" + e.detail + ")"
	}
	return msg
}

// Unwrap makes a busy detach hostenv.ErrVolumeBusy, whatever the shape.
func (e *busyError) Unwrap() error { return hostenv.ErrVolumeBusy }

// checkHotParams validates the params of volume.attach and volume.detach.
func checkHotParams(p api.VolumeHotParams) error {
	v := p.Volume
	err := errors.Join(volume.CheckID(v.VolumeID), api.CheckVolumeName(v.Name), api.CheckMountPath(v.Path))
	if err == nil && (p.AllocationID == "" || p.PosixUser == "") {
		err = errors.New("allocation and user are required")
	}
	if err == nil && api.VolumeAsDisk(p.Shape) && len(v.VolumeID) > maxSerial {
		err = fmt.Errorf("volume id %q is longer than a disk serial (%d bytes)", v.VolumeID, maxSerial)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	return nil
}

// volumeHotAttach mounts a volume in a running allocation.
func volumeHotAttach(ctx context.Context, env *Env, p api.VolumeHotParams, rep Reporter) (any, error) {
	if err := checkHotParams(p); err != nil {
		return nil, err
	}
	do := func(ctx context.Context) error { return attachBare(ctx, env, p) }
	if api.VolumeAsDisk(p.Shape) {
		do = func(ctx context.Context) error { return attachSlice(ctx, env, p) }
	}
	if err := NewPhased(env, rep).Run(ctx, PhaseVolumeAttach, do, nil); err != nil {
		return nil, err
	}
	return hostproto.VolumeTaskResult{VolumeID: p.Volume.VolumeID}, nil
}

// volumeHotDetach unmounts a volume from a running allocation; one in use
// stays (busyError).
func volumeHotDetach(ctx context.Context, env *Env, p api.VolumeHotParams, rep Reporter) (any, error) {
	if err := checkHotParams(p); err != nil {
		return nil, err
	}
	do := func(ctx context.Context) error { return detachBare(ctx, env, p) }
	if api.VolumeAsDisk(p.Shape) {
		do = func(ctx context.Context) error { return detachSlice(ctx, env, p) }
	}
	if err := NewPhased(env, rep).Run(ctx, PhaseVolumeDetach, do, nil); err != nil {
		return nil, err
	}
	return hostproto.VolumeTaskResult{VolumeID: p.Volume.VolumeID}, nil
}

// attachBare mounts the volume for the allocation's user as provisioning
// does (attachVolumes); a failure after the mount unmounts it again.
func attachBare(ctx context.Context, env *Env, p api.VolumeHotParams) error {
	if env.Volumes == nil {
		return ErrNoVolumes
	}
	if err := attachVolumes(ctx, env, p.PosixUser, []api.VolumeAttachment{p.Volume}); err != nil {
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), hotUndoTimeout)
		defer cancel()
		if info, serr := env.Volumes.Stat(undo, p.Volume.VolumeID); serr == nil && info.MountPoint == volumeTarget(env, p.Volume.Path) {
			err = errors.Join(err, env.Volumes.Unmount(undo, p.Volume.VolumeID))
		}
		return err
	}
	return nil
}

// detachBare unmounts the volume from the allocation's user and removes
// its ~/NAME link. One that is not mounted is success (a retry); one
// mounted for someone else is refused.
func detachBare(ctx context.Context, env *Env, p api.VolumeHotParams) error {
	if env.Volumes == nil {
		return ErrNoVolumes
	}
	ids, err := lookupPosix(p.PosixUser)
	if err != nil {
		return fmt.Errorf("detach volume: %w", err)
	}
	info, err := env.Volumes.Stat(ctx, p.Volume.VolumeID)
	if err != nil {
		return err
	}
	if mp := info.MountPoint; mp != "" {
		fi, err := os.Lstat(mp)
		if err != nil {
			return fmt.Errorf("detach volume: %w", err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != ids.uid {
			return fmt.Errorf("%w: volume %s is not mounted for %s", ErrInvalidParams, p.Volume.VolumeID, p.PosixUser)
		}
		if pids := processesUsing(mp); len(pids) > 0 {
			return &busyError{name: p.Volume.Name, alloc: p.AllocationID, path: p.Volume.Path,
				detail: "used by processes " + strings.Join(pids, ", ")}
		}
		dev, err := mountinfo.DeviceOf(mp)
		if err != nil {
			return fmt.Errorf("detach volume: %w", err)
		}
		rec := heldRecord{Dev: dev, Identity: deviceIdentity(dev), User: p.PosixUser}
		// A container's bind mount of it, a copy in a namespace of
		// another user namespace (volume_held.go): refused, the volume
		// kept mounted. The user's own podman pause process alone is
		// ended, and the volume looked at again (volume_pause.go).
		group := peerGroup(dev, mp)
		hs := mountedElsewhere(dev, mp, group)
		if len(hs) > 0 && endUserPause(hs, ids.uid, env.now) {
			env.Log.Info("ended the user's podman pause process holding a volume", "user", p.PosixUser,
				"volume", p.Volume.VolumeID, "pids", holderPids(hs))
			hs = mountedElsewhere(dev, mp, group)
		}
		if len(hs) > 0 {
			return &busyError{name: p.Volume.Name, alloc: p.AllocationID, path: p.Volume.Path,
				detail: "mounted in the mount namespaces of processes " + holderPids(hs)}
		}
		// Every copy left after the umount keeps the filesystem alive,
		// whatever its tags: never reported detached while one does. It
		// is not mounted again on the node (e2fsck would check a live
		// filesystem); the retry looks again (heldMarker).
		if err := unmountHeld(ctx, env, p.Volume.VolumeID, &rec); err != nil {
			var he *heldError
			switch {
			case errors.As(err, &he):
				return &busyError{name: p.Volume.Name, alloc: p.AllocationID, path: p.Volume.Path,
					detail: "unmounted on the node, still mounted in the mount namespaces of processes " + he.pids}
			case errors.Is(err, hostenv.ErrVolumeBusy), strings.Contains(err.Error(), "busy"):
				// Something opened it between the look and umount(8),
				// which refuses (the volume stays mounted), or the image
				// is still open elsewhere.
				return &busyError{name: p.Volume.Name, alloc: p.AllocationID, path: p.Volume.Path, detail: err.Error()}
			}
			return err
		}
	}
	if err := checkHeldAfterUnmount(env, p.Volume.VolumeID, func(hs []nsHolder) error {
		return &busyError{name: p.Volume.Name, alloc: p.AllocationID, path: p.Volume.Path,
			detail: "unmounted on the node, still mounted in the mount namespaces of processes " + holderPids(hs)}
	}); err != nil {
		return err
	}
	f, err := hostenv.NewFactory(hostenv.Config{StateDir: env.StateDir, Accounts: noAccounts{}})
	if err != nil {
		return err
	}
	acct := f.POSIX(hostenv.Account{Name: p.PosixUser, Home: ids.home,
		Credential: &syscall.Credential{Uid: uint32(ids.uid), Gid: uint32(ids.gid)}})
	// No link is success: a retry, or the user removed it.
	if err := acct.Detach(ctx, p.Volume.Name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// hotUndoTimeout bounds the undo of a failed attach, after the task's
// context may have ended.
const hotUndoTimeout = 2 * time.Minute

// processesUsing lists the processes whose working directory, root or
// an open file is at or under dir (proc(5)): what keeps a volume busy.
func processesUsing(dir string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	under := func(link string) bool {
		t, err := os.Readlink(link)
		return err == nil && (t == dir || strings.HasPrefix(t, dir+"/"))
	}
	for _, pd := range procs {
		pid := filepath.Base(pd)
		if _, err := strconv.Atoi(pid); err != nil || pid == strconv.Itoa(os.Getpid()) {
			continue
		}
		hit := under(pd+"/cwd") || under(pd+"/root")
		if !hit {
			fds, _ := filepath.Glob(pd + "/fd/*")
			hit = slices.ContainsFunc(fds, under)
		}
		if hit {
			out = append(out, pid)
		}
	}
	return out
}

// attachSlice lends the volume to the slice's VM and hot-plugs it; a
// failure returns the volume.
func attachSlice(ctx context.Context, env *Env, p api.VolumeHotParams) error {
	l, err := lender(env)
	if err != nil {
		return err
	}
	e, err := openSlice(ctx, env, p)
	if err != nil {
		return err
	}
	img, err := l.Lend(ctx, p.Volume.VolumeID, p.AllocationID)
	if err != nil {
		return err
	}
	if err := e.Attach(ctx, hostenv.Mount{Name: p.Volume.VolumeID, Source: img, Path: p.Volume.Path}); err != nil {
		return errors.Join(err, l.Return(context.WithoutCancel(ctx), p.Volume.VolumeID, p.AllocationID))
	}
	return nil
}

// detachSlice unmounts the volume in the guest and unplugs it, then
// returns it to the node; a volume the guest uses stays (busyError).
func detachSlice(ctx context.Context, env *Env, p api.VolumeHotParams) error {
	l, err := lender(env)
	if err != nil {
		return err
	}
	e, err := openSlice(ctx, env, p)
	if err != nil {
		return err
	}
	if err := e.Detach(ctx, p.Volume.VolumeID); err != nil {
		if errors.Is(err, hostenv.ErrVolumeBusy) {
			return &busyError{name: p.Volume.Name, alloc: p.AllocationID, path: p.Volume.Path, detail: err.Error()}
		}
		return err
	}
	return l.Return(ctx, p.Volume.VolumeID, p.AllocationID)
}

// openSlice opens the slice's environment.
func openSlice(ctx context.Context, env *Env, p api.VolumeHotParams) (hostenv.Environment, error) {
	if env.Envs == nil {
		return nil, fmt.Errorf("%w: this hostd opens no allocation environments", ErrNoVolumes)
	}
	return env.Envs.Open(ctx, hostenv.Alloc{ID: p.AllocationID, PosixUser: p.PosixUser, Shape: p.Shape})
}
