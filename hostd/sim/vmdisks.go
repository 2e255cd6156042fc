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
	"github.com/gpuaas/gpuaas/internal/mountinfo"
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
	// shared are the domains whose root is bound onto itself as a
	// shared mount (sharedRoot), by domain: the root.
	shared map[string]string
	// held are disks unmounted in the guest whose filesystem another
	// mount namespace still holds, by domain and serial: the device.
	held map[string]map[string]string
}

// live is h's plugged disks.
func (h *Hypervisor) live() *liveDisks {
	l := &h.plugged
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.disks == nil {
		l.disks, l.mounts = map[string]map[string]host.Disk{}, map[string]map[string]string{}
		l.shared, l.held = map[string]string{}, map[string]map[string]string{}
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
	if _, ok := l.held[name][serial]; ok {
		return fmt.Errorf("detach disk %s from %s: its filesystem is still mounted in another mount namespace", serial, name)
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
	// A disk whose last mount outlived its umount in another namespace
	// is not mounted again: two live ext4 instances on one image.
	if dev, ok := l.held[name][serial]; ok {
		if err := stillHeld(dev, disk); err != nil {
			return fmt.Errorf("mount %s in %s: %w", serial, name, err)
		}
		delete(l.held[name], serial)
	}
	if err := h.sharedRoot(ctx, l, name); err != nil {
		return fmt.Errorf("mount %s in %s: %w", serial, name, err)
	}
	made, err := mkdirAll(target)
	if err != nil {
		l.unshareRoot(name)
		return fmt.Errorf("mount %s in %s: %w", serial, name, err)
	}
	undo := func() {
		if made != "" {
			_ = os.RemoveAll(made)
		}
		l.unshareRoot(name)
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
		// A retry after the filesystem outlived the umount elsewhere.
		if dev, ok := l.held[name][serial]; ok {
			if err := stillHeld(dev, l.disks[name][serial]); err != nil {
				return err
			}
			delete(l.held[name], serial)
		}
		l.unshareRoot(name)
		return nil
	}
	dev, err := mountinfo.DeviceOf(target)
	if err != nil {
		return fmt.Errorf("umount %s: %w", target, err)
	}
	if out, err := exec.CommandContext(ctx, "umount", target).CombinedOutput(); err != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "busy") {
			return fmt.Errorf("%w: umount %s: %s", env.ErrVolumeBusy, target, msg)
		}
		return fmt.Errorf("umount %s: %w: %s", target, err, msg)
	}
	delete(l.mounts[name], serial)
	// What a real guest's umount guarantees: the filesystem is shut
	// down, its blocks on the image. A copy of the mount that outlived
	// the umount (sharedRoot) would keep it live, and the image's next
	// mount would read stale blocks: never reported as unplugged.
	if err := stillHeld(dev, l.disks[name][serial]); err != nil {
		if l.held[name] == nil {
			l.held[name] = map[string]string{}
		}
		l.held[name][serial] = dev
		return err
	}
	l.unshareRoot(name)
	return nil
}

// unshareRoot undoes sharedRoot once domain name has no disk mounted or
// held (l.mu held): a guest with nothing mounted leaves no mount behind.
func (l *liveDisks) unshareRoot(name string) {
	root, ok := l.shared[name]
	if !ok || len(l.mounts[name]) > 0 || len(l.held[name]) > 0 {
		return
	}
	if err := exec.Command("umount", root).Run(); err != nil {
		return // busy (a process's cwd in the guest): kept shared until the domain stops
	}
	delete(l.shared, name)
}

// stillHeld is env.ErrVolumeBusy until disk's filesystem on loop
// device dev is shut down: the device (set to clear itself when its last
// user closes it) lets go of the image only after the last mount of the
// filesystem, in any namespace, is gone and its blocks are written — a
// namespace's end and its mounts' release are not one step, so the mount
// tables alone do not say it (one freed and reused for another file is
// not the disk's).
func stillHeld(dev string, disk host.Disk) error {
	b, err := os.ReadFile("/sys/dev/block/" + dev + "/loop/backing_file")
	if err != nil || strings.TrimSpace(string(b)) != disk.Source {
		return nil
	}
	detail := "is being shut down"
	if pids := mountedIn(dev); len(pids) > 0 {
		detail = "is still mounted in the mount namespaces of processes " + strings.Join(pids, ", ")
	}
	return fmt.Errorf("%w: disk %s is unmounted in the guest and its filesystem %s", env.ErrVolumeBusy, disk.Serial, detail)
}

// sharedRoot binds domain name's root onto itself as a shared mount
// (once; l.mu held). A mount namespace made while a disk is mounted in
// the guest — rootless podman's pause process, unshare(1) — copies the
// mount: under a private parent (this machine's, and any host's without
// systemd) the copy survives the guest's umount and keeps the filesystem
// live with its dirty pages; under a shared one a namespace that keeps
// it a slave (podman's, unshare --propagation slave) has the umount take
// its copy too (mount_namespaces(7), "Shared subtrees"). One that makes
// its copies private (unshare(1)'s default) still holds the filesystem:
// the detach is busy until it ends (stillHeld).
func (h *Hypervisor) sharedRoot(ctx context.Context, l *liveDisks, name string) error {
	if _, ok := l.shared[name]; ok {
		return nil
	}
	root := h.GuestPath(name, "/")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "mount", "--bind", root, root).CombinedOutput(); err != nil {
		return fmt.Errorf("bind the guest's root: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.CommandContext(ctx, "mount", "--make-shared", root).CombinedOutput(); err != nil {
		_ = exec.Command("umount", "-l", root).Run()
		return fmt.Errorf("share the guest's root: %w: %s", err, strings.TrimSpace(string(out)))
	}
	l.shared[name] = root
	return nil
}

// mountedIn lists a process per mount namespace whose mount table has a
// mount of device dev (proc(5), /proc/PID/mountinfo).
func mountedIn(dev string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	seen := map[string]bool{}
	var out []string
	for _, mi := range procs {
		pd := filepath.Dir(mi)
		ns, err := os.Readlink(pd + "/ns/mnt")
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		if ms, err := mountinfo.Read(mi); err == nil && len(mountinfo.OfDevice(ms, dev)) > 0 {
			out = append(out, filepath.Base(pd))
		}
	}
	return out
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
	if root, ok := l.shared[name]; ok {
		_ = exec.Command("umount", "-l", root).Run()
		delete(l.shared, name)
	}
	delete(l.mounts, name)
	delete(l.held, name)
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
