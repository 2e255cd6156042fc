package env

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Hot attach of a volume to a running slice (docs/decisions/0055-hot-attach.md):
// the volume's image becomes a virtio disk of the live domain whose serial
// is the volume id, and the guest mounts it at the volume's path as its
// root (the seed gives the renter sudo), owned by the renter: the same
// mount the guest makes at boot for a volume attached at define
// (hostd/guestimage's minimal /init, the production image's cloud-init).
// Detach unmounts it in the guest first; a volume the guest still uses
// stays attached and the error wraps ErrVolumeBusy.

// ErrVolumeBusy: the guest could not unmount the volume (a process uses
// it); it stays attached and mounted.
var ErrVolumeBusy = errors.New("environment: volume in use in the guest")

// DiskPlugger is implemented by hypervisors that can add a disk to a
// running domain and take it away again (hostd/libvirt).
type DiskPlugger interface {
	// AttachDisk adds disk (with its Serial) to running domain name.
	AttachDisk(ctx context.Context, name string, disk host.Disk) error
	// DetachDisk removes the disk with serial once the guest lets go;
	// no such disk is success.
	DetachDisk(ctx context.Context, name, serial string) error
}

// GuestMounter is implemented by hypervisors whose guests cannot mount a
// disk themselves (the sim's: SSH servers of host accounts with no root
// inside): the hypervisor mounts a plugged disk where the guest sees path,
// owned by guestUser, and unmounts it (ErrVolumeBusy when in use).
type GuestMounter interface {
	MountInGuest(ctx context.Context, name, serial, path, guestUser string, readOnly bool) error
	UnmountInGuest(ctx context.Context, name, serial string) error
}

// undoTimeout bounds the detach that undoes a failed attach, after the
// caller's context may have ended.
const undoTimeout = 2 * time.Minute

// serialPattern is a disk serial hostd names volumes by: a volume id, at
// most virtio-blk's 20 bytes (VIRTIO_BLK_ID_BYTES).
var serialPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,19}$`)

// Exit codes of the guest scripts.
const (
	guestBusy = 10
)

// guestAttachScript mounts the disk with serial $1 at $2 for user $3
// (read-only when $4 is "ro"). It waits for the disk to appear (hot-plugged
// disks come asynchronously), refuses a path that is a mount point of
// something else, and leaves nothing behind when it fails: no mount, no
// directory it made. The disk already mounted there is success (a retry).
const guestAttachScript = `s=$1 p=$2 u=$3 ro=$4
dev=
i=0
while [ -z "$dev" ] && [ $i -lt 300 ]; do
	for f in /sys/block/vd*/serial; do
		if [ "$(cat "$f" 2>/dev/null)" = "$s" ]; then d=${f%/serial}; dev=/dev/${d##*/}; fi
	done
	[ -n "$dev" ] && [ -b "$dev" ] || { dev=; sleep 0.1; i=$((i + 1)); }
done
[ -n "$dev" ] || { echo "no disk with serial $s appeared in the guest"; exit 3; }
if awk -v p="$p" -v d="$dev" '$2 == p && $1 == d { f = 1 } END { exit !f }' /proc/mounts; then exit 0; fi
if awk -v p="$p" '$2 == p { f = 1 } END { exit !f }' /proc/mounts; then echo "$p is already a mount point in the guest"; exit 4; fi
made=
if [ ! -d "$p" ]; then
	top=$p
	while [ ! -e "${top%/*}" ] && [ -n "${top%/*}" ]; do top=${top%/*}; done
	out=$(mkdir -p "$p" 2>&1) || { echo "mkdir $p: $out"; exit 5; }
	made=$top
fi
opts=nodev,nosuid
[ "$ro" = ro ] && opts=$opts,ro
if ! out=$(mount -t ext4 -o "$opts" "$dev" "$p" 2>&1); then
	[ -n "$made" ] && rm -r "$made"
	echo "mount $dev at $p: $out"
	exit 6
fi
uid=$(id -u "$u") && gid=$(id -g "$u") || { umount "$p"; [ -n "$made" ] && rm -r "$made"; echo "no user $u in the guest"; exit 7; }
if [ "$ro" != ro ] && [ "$(ls -dn "$p" | awk '{ print $3 }')" != "$uid" ]; then
	out=$(chown -R "$uid:$gid" "$p" 2>&1) || { umount "$p"; [ -n "$made" ] && rm -r "$made"; echo "chown $p: $out"; exit 8; }
fi
`

// guestDetachScript unmounts every mount of the disk with serial $1; no
// such disk is success. A mount it cannot unmount exits guestBusy, naming
// what holds it when the guest can tell.
const guestDetachScript = `s=$1
dev=
for f in /sys/block/vd*/serial; do
	if [ "$(cat "$f" 2>/dev/null)" = "$s" ]; then d=${f%/serial}; dev=/dev/${d##*/}; fi
done
[ -n "$dev" ] || exit 0
sync
for m in $(awk -v d="$dev" '$1 == d { print $2 }' /proc/mounts); do
	if ! out=$(umount "$m" 2>&1); then
		who=$(fuser -m "$m" 2>/dev/null | tr -s ' ')
		echo "umount $m: $out${who:+ (used by processes$who)}"
		exit 10
	fi
done
`

// checkVMMount validates a Mount for a VM: Name is a disk serial, Path a
// mount path, Source an absolute host path.
func checkVMMount(m Mount) error {
	if !serialPattern.MatchString(m.Name) {
		return fmt.Errorf("%w: %q is not a volume id usable as a disk serial", ErrInvalidSpec, m.Name)
	}
	if err := api.CheckMountPath(m.Path); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if !filepath.IsAbs(m.Source) {
		return fmt.Errorf("%w: source %q is not an absolute path", ErrInvalidSpec, m.Source)
	}
	return nil
}

// plugger is the factory's hypervisor as a DiskPlugger.
func (v *vmEnv) plugger() (DiskPlugger, error) {
	p, ok := v.f.cfg.Hypervisor.(DiskPlugger)
	if !ok {
		return nil, fmt.Errorf("%w: this node's hypervisor cannot hot-plug disks", ErrUnsupported)
	}
	return p, nil
}

// Attach implements Environment: hot-plugs m.Source as a virtio disk with
// serial m.Name and mounts it in the guest at m.Path, owned by the
// renter. When the mount fails the disk is unplugged again, so the guest
// is left as it was.
func (v *vmEnv) Attach(ctx context.Context, m Mount) error {
	p, err := v.plugger()
	if err != nil {
		return fmt.Errorf("attach %s to %s's VM: %w", m.Name, v.alloc, err)
	}
	if err := checkVMMount(m); err != nil {
		return fmt.Errorf("attach %s to %s's VM: %w", m.Name, v.alloc, err)
	}
	disk := host.Disk{Source: m.Source, Raw: true, ReadOnly: m.ReadOnly, Serial: m.Name}
	if err := p.AttachDisk(ctx, v.alloc, disk); err != nil {
		return fmt.Errorf("attach %s to %s's VM: %w", m.Name, v.alloc, err)
	}
	ro := "rw"
	if m.ReadOnly {
		ro = "ro"
	}
	if gm, ok := p.(GuestMounter); ok {
		err = gm.MountInGuest(ctx, v.alloc, m.Name, m.Path, v.user, m.ReadOnly)
	} else {
		err = v.asRoot(ctx, guestAttachScript, m.Name, m.Path, v.user, ro)
	}
	if err != nil {
		err = fmt.Errorf("mount %s at %s in %s's VM: %w", m.Name, m.Path, v.alloc, err)
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		defer cancel()
		if uerr := p.DetachDisk(undo, v.alloc, m.Name); uerr != nil {
			err = errors.Join(err, fmt.Errorf("undo: %w", uerr))
		}
		return err
	}
	return nil
}

// Detach implements Environment: unmounts the disk with serial name in
// the guest, then unplugs it. A volume the guest cannot unmount stays
// attached (ErrVolumeBusy).
func (v *vmEnv) Detach(ctx context.Context, name string) error {
	if !serialPattern.MatchString(name) {
		return fmt.Errorf("detach %q from %s's VM: %w: not a volume id", name, v.alloc, ErrInvalidSpec)
	}
	p, err := v.plugger()
	if err != nil {
		return fmt.Errorf("detach %s from %s's VM: %w", name, v.alloc, err)
	}
	if gm, ok := p.(GuestMounter); ok {
		err = gm.UnmountInGuest(ctx, v.alloc, name)
	} else {
		err = v.asRoot(ctx, guestDetachScript, name)
	}
	if err != nil {
		return fmt.Errorf("detach %s from %s's VM: %w", name, v.alloc, err)
	}
	if err := p.DetachDisk(ctx, v.alloc, name); err != nil {
		return fmt.Errorf("detach %s from %s's VM: %w", name, v.alloc, err)
	}
	return nil
}

// asRoot runs script with args as the guest's root (sudo, which the seed
// gives the renter) and fails with its output when it exits non-zero.
func (v *vmEnv) asRoot(ctx context.Context, script string, args ...string) error {
	// Two buffers: the session copies stdout and stderr concurrently.
	var out, errOut bytes.Buffer
	argv := append([]string{"sudo", "sh", "-c", script, "gpuaas-hotplug"}, args...)
	pr, err := v.Exec(ctx, ExecSpec{Argv: argv, Stdout: &out, Stderr: &errOut})
	if err != nil {
		return err
	}
	done := make(chan ExitStatus, 1)
	go func() { done <- pr.Wait() }()
	var st ExitStatus
	select {
	case st = <-done:
	case <-ctx.Done():
		pr.Signal(syscall.SIGKILL)
		return ctx.Err()
	}
	msg := strings.TrimSpace(out.String() + " " + errOut.String())
	switch {
	case st.Signal != 0:
		return fmt.Errorf("guest script ended by signal %d: %s", st.Signal, msg)
	case st.Code == guestBusy:
		return fmt.Errorf("%w: %s", ErrVolumeBusy, msg)
	case st.Code != 0:
		return fmt.Errorf("guest script exited %d: %s", st.Code, msg)
	}
	return nil
}
