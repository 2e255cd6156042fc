package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
)

// Hot-plugged disks of sim guests (docs/decisions/0055-hot-attach.md). A
// sim guest is an SSH server of host accounts with no root inside and the
// host's filesystem, so the hypervisor plays both parts: AttachDisk and
// DetachDisk keep the running domain's plugged disks, and MountInGuest
// mounts a plugged disk's ext4 image (a direct-I/O loop device) at the guest path under the
// domain's own root (GuestPath), owned by the guest user — the mount a
// real guest makes as its root. Plugged disks are live only, as in
// libvirt: a domain that stops loses them (its mounts are undone).

var (
	_ env.DiskPlugger  = (*Hypervisor)(nil)
	_ env.GuestMounter = (*Hypervisor)(nil)
)

// liveDisks are the running domains' plugged disks and their mounts.
type liveDisks struct {
	mu sync.Mutex
	// disks by domain and serial; mounts by domain and serial: where the
	// disk is mounted.
	disks  map[string]map[string]host.Disk
	mounts map[string]map[string]string
}

// live is h's plugged disks.
func (h *Hypervisor) live() *liveDisks {
	l := &h.plugged
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.disks == nil {
		l.disks, l.mounts = map[string]map[string]host.Disk{}, map[string]map[string]string{}
	}
	return l
}

// GuestPath is where path of domain name's guest is on the host: under
// the domain's own root, so sim guests sharing a machine never mount over
// each other (or the host's /data).
func (h *Hypervisor) GuestPath(name, path string) string {
	return filepath.Join(h.dir, "roots", name, filepath.Clean("/"+path))
}

// running fails unless domain name runs.
func (h *Hypervisor) running(op, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.lookup(op, name)
	if err != nil {
		return err
	}
	if d.vm == nil {
		return fmt.Errorf("%s %s: %w", op, name, host.ErrDomainNotRunning)
	}
	return nil
}

// AttachDisk implements env.DiskPlugger: disk is plugged into running
// domain name. The same serial and source again is success.
func (h *Hypervisor) AttachDisk(_ context.Context, name string, disk host.Disk) error {
	if disk.Serial == "" || disk.Source == "" {
		return fmt.Errorf("attach disk to %s: %w: a serial and a source are required", name, host.ErrInvalidSpec)
	}
	if err := h.running("attach disk to", name); err != nil {
		return err
	}
	l := h.live()
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.disks[name][disk.Serial]; ok {
		if old.Source == disk.Source {
			return nil
		}
		return fmt.Errorf("attach disk to %s: %w: a disk with serial %s is attached from another source", name, host.ErrInvalidSpec, disk.Serial)
	}
	if l.disks[name] == nil {
		l.disks[name] = map[string]host.Disk{}
	}
	l.disks[name][disk.Serial] = disk
	return nil
}

// DetachDisk implements env.DiskPlugger: a disk still mounted in the
// guest is not released (the guest has not let go).
func (h *Hypervisor) DetachDisk(_ context.Context, name, serial string) error {
	l := h.live()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.mounts[name][serial]; ok {
		return fmt.Errorf("detach disk %s from %s: still mounted in the guest", serial, name)
	}
	delete(l.disks[name], serial)
	return nil
}

// Disks are the disks plugged into domain name, by serial.
func (h *Hypervisor) Disks(name string) []string {
	l := h.live()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for s := range l.disks[name] {
		out = append(out, s)
	}
	return out
}

// MountInGuest implements env.GuestMounter: the plugged disk with serial
// is mounted (ext4, nodev,nosuid) at GuestPath(name, path), owned by
// guest user guestUser. Nothing is left behind when it fails.
func (h *Hypervisor) MountInGuest(ctx context.Context, name, serial, path, guestUser string, readOnly bool) error {
	l := h.live()
	l.mu.Lock()
	defer l.mu.Unlock()
	disk, ok := l.disks[name][serial]
	if !ok {
		return fmt.Errorf("mount %s in %s: no disk with serial %s", serial, name, serial)
	}
	target := h.GuestPath(name, path)
	if at, ok := l.mounts[name][serial]; ok {
		if at == target {
			return nil
		}
		return fmt.Errorf("mount %s in %s: already mounted at another path", serial, name)
	}
	made, err := mkdirAll(target)
	if err != nil {
		return fmt.Errorf("mount %s in %s: %w", serial, name, err)
	}
	undo := func() {
		if made != "" {
			_ = os.RemoveAll(made)
		}
	}
	opts := "nodev,nosuid"
	if readOnly {
		opts += ",ro"
	}
	// A loop device with direct I/O, as hostd/volume's own mounts: the
	// image's blocks are written as a real guest's cache='none' disk
	// writes them, with no dirty host page left for the volume store's
	// O_DIRECT readers (fsck) to miss.
	out, err := exec.CommandContext(ctx, "losetup", "--find", "--show", "--direct-io=on", disk.Source).CombinedOutput()
	dev := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(dev, "/dev/loop") {
		undo()
		return fmt.Errorf("mount %s in %s: losetup: %v: %s", serial, name, err, dev)
	}
	if out, err := exec.CommandContext(ctx, "mount", "-t", "ext4", "-o", opts, dev, target).CombinedOutput(); err != nil {
		_ = exec.Command("losetup", "-d", dev).Run()
		undo()
		return fmt.Errorf("mount %s in %s: %w: %s", serial, name, err, strings.TrimSpace(string(out)))
	}
	// The device goes with its last user: the mount.
	_ = exec.Command("losetup", "-d", dev).Run()
	if h.guests != nil && !readOnly {
		// System users: the files are the guest user's, as a real guest
		// gives them to the renter (sandbox guests run as hostd).
		if err := chownTree(target, guestUser); err != nil {
			_ = exec.Command("umount", target).Run()
			undo()
			return fmt.Errorf("mount %s in %s: %w", serial, name, err)
		}
	}
	if l.mounts[name] == nil {
		l.mounts[name] = map[string]string{}
	}
	l.mounts[name][serial] = target
	return nil
}

// UnmountInGuest implements env.GuestMounter: a mount in use is
// env.ErrVolumeBusy and stays.
func (h *Hypervisor) UnmountInGuest(ctx context.Context, name, serial string) error {
	l := h.live()
	l.mu.Lock()
	defer l.mu.Unlock()
	target, ok := l.mounts[name][serial]
	if !ok {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "umount", target).CombinedOutput(); err != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "busy") {
			return fmt.Errorf("%w: umount %s: %s", env.ErrVolumeBusy, target, msg)
		}
		return fmt.Errorf("umount %s: %w: %s", target, err, msg)
	}
	delete(l.mounts[name], serial)
	return nil
}

// unplugAll undoes domain name's mounts and plugs when it stops (a lazy
// unmount: the guest's processes are gone or going).
func (h *Hypervisor) unplugAll(name string) {
	l := h.live()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, target := range l.mounts[name] {
		_ = exec.Command("umount", "-l", target).Run()
	}
	delete(l.mounts, name)
	delete(l.disks, name)
}

// mkdirAll makes dir and returns the topmost directory it made ("" when
// dir was there).
func mkdirAll(dir string) (string, error) {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return "", fmt.Errorf("%s is not a directory", dir)
		}
		return "", nil
	}
	top := dir
	for {
		parent := filepath.Dir(top)
		if _, err := os.Stat(parent); err == nil || parent == top {
			break
		}
		top = parent
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return top, nil
}

// chownTree gives everything under dir to the POSIX user name.
func chownTree(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
