package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/mountinfo"
)

// A container binds a volume's mount point into a mount namespace of its
// own: its processes' cwd, root and fds name paths of that namespace, so
// processesUsing misses them, and the host's umount succeeds while the
// bind mount keeps the filesystem alive (docs/decisions/0064-volume-attach-running.md).
// What is looked for instead is the filesystem's device in the mount
// table of every mount namespace (proc(5), /proc/PID/mountinfo), and
// after the umount every copy still there is a holder, whatever its
// propagation tags (docs/decisions/0066-volume-mount-propagation.md).

// deviceIdentity names what device dev ("major:minor") is now: a loop
// device's backing file, a device-mapper device's (an LVM volume's) uuid,
// "" for anything else or a device gone (sysfs-block(5)). A device number
// is reused once let go; this says whether it is still the volume's.
func deviceIdentity(dev string) string {
	base := filepath.Join("/sys/dev/block", dev)
	if b, err := os.ReadFile(filepath.Join(base, "loop", "backing_file")); err == nil {
		return "loop:" + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile(filepath.Join(base, "dm", "uuid")); err == nil && strings.TrimSpace(string(b)) != "" {
		return "dm:" + strings.TrimSpace(string(b))
	}
	return ""
}

// nsHolder is a mount namespace other than hostd's mount that has a
// volume's filesystem mounted, with the processes in it.
type nsHolder struct {
	ns   string
	pids []string
}

// holderPids names one process of each holder (what a busy detach
// reports).
func holderPids(hs []nsHolder) string {
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.pids[0])
	}
	return strings.Join(out, ", ")
}

// mountedElsewhere lists the mount namespaces whose mount table has a
// mount of device dev other than hostd's own mount of it at mp (mp ""
// counts every mount): a container's bind mount, a namespace that copied
// the host's mounts, or a bind mount on the host. With group (hostd's
// mount's peer group, "shared:N") a copy that is a peer or a slave of it
// in a namespace of hostd's own user namespace is not counted: the node's
// umount propagates to it. A copy in another user namespace is locked
// there and counted (docs/decisions/0066-volume-mount-propagation.md).
// After the umount group is "": every copy left is a holder.
func mountedElsewhere(dev, mp, group string) []nsHolder {
	self, _ := os.Readlink("/proc/self/ns/mnt")
	selfUser, _ := os.Readlink("/proc/self/ns/user")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	byNS := map[string][]string{}
	var order []string
	for _, pd := range procs {
		pid := filepath.Base(pd)
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		ns, err := os.Readlink(pd + "/ns/mnt")
		if err != nil {
			continue // gone, a zombie, or a kernel thread
		}
		if _, ok := byNS[ns]; !ok {
			order = append(order, ns)
		}
		byNS[ns] = append(byNS[ns], pid)
	}
	var out []nsHolder
	for _, ns := range order {
		pids := byNS[ns]
		// The first process that can still be read: one that exits
		// meanwhile must not hide its namespace's mounts.
		pd, ms := "", []mountinfo.Mount(nil)
		for _, pid := range pids {
			if all, err := mountinfo.Read("/proc/" + pid + "/mountinfo"); err == nil {
				pd, ms = "/proc/"+pid, mountinfo.OfDevice(all, dev)
				break
			}
		}
		if pd == "" {
			continue
		}
		userNS, _ := os.Readlink(pd + "/ns/user")
		for _, m := range ms {
			if ns == self && m.Point == mp {
				continue
			}
			if group != "" && userNS == selfUser && (m.Shared() == group || m.Master() == group) {
				continue
			}
			out = append(out, nsHolder{ns: ns, pids: pids})
			break
		}
	}
	return out
}

// peerGroup returns the peer group N of hostd's own mount of dev at mp
// ("shared:N" in /proc/self/mountinfo), "" when it is not shared.
func peerGroup(dev, mp string) string {
	ms, _ := mountinfo.Read("/proc/self/mountinfo")
	for _, m := range mountinfo.OfDevice(ms, dev) {
		if m.Point == mp {
			if g := m.Shared(); g != "" {
				return g
			}
		}
	}
	return ""
}

// heldMarker is where an unmount (a detach's or a release's) that found
// the volume's filesystem still mounted in another namespace keeps what
// identifies it, so that the retry (the volume no longer mounted on the
// node) looks again instead of reporting it detached, and an attach
// does not mount a second instance of it.
func heldMarker(env *Env, volumeID string) string {
	return filepath.Join(env.StateDir, "volume-held-"+volumeID)
}

// heldRecord is a heldMarker's content: the device the filesystem was
// on, what that device was then (deviceIdentity: the same number may be
// another volume's later), and the user it was mounted for.
type heldRecord struct {
	Dev      string `json:"dev"`
	Identity string `json:"identity"`
	User     string `json:"user"`
}

// markHeld records that volumeID's filesystem on dev outlived its unmount.
func markHeld(env *Env, volumeID string, rec heldRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return os.WriteFile(heldMarker(env, volumeID), append(b, '\n'), 0o600)
}

// readHeld reads volumeID's marker; ok is false when there is none.
func readHeld(env *Env, volumeID string) (rec heldRecord, ok bool, err error) {
	b, err := os.ReadFile(heldMarker(env, volumeID))
	if errors.Is(err, os.ErrNotExist) {
		return heldRecord{}, false, nil
	}
	if err != nil {
		return heldRecord{}, false, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		// Written by an older hostd: "major:minor group", no identity.
		dev, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		rec = heldRecord{Dev: dev}
	}
	return rec, true, nil
}

// stillHeld lists the namespaces that still have the filesystem of rec
// mounted: none once its device is let go or is another's now.
func stillHeld(rec heldRecord) []nsHolder {
	if rec.Dev == "" || (rec.Identity != "" && deviceIdentity(rec.Dev) != rec.Identity) {
		return nil
	}
	hs := mountedElsewhere(rec.Dev, "", "")
	if len(hs) == 0 && ext4Live(rec.Dev) {
		// No process shows it (a namespace kept by a file descriptor
		// alone, or one ending), yet the filesystem lives.
		hs = []nsHolder{{ns: "", pids: []string{"none found (a mount namespace without processes, or one ending)"}}}
	}
	return hs
}

// ext4Live reports whether an ext4 filesystem on device dev
// ("major:minor") is alive in any mount namespace: the kernel keeps
// /sys/fs/ext4/<device> from its mount until its last mount anywhere is
// gone (Documentation/ABI/testing/sysfs-fs-ext4) — what the mount tables
// of processes cannot show for a namespace no process is in.
func ext4Live(dev string) bool {
	link, err := os.Readlink(filepath.Join("/sys/dev/block", dev))
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join("/sys/fs/ext4", filepath.Base(link)))
	return err == nil
}

// checkHeldAfterUnmount reports busy while an earlier unmount left the
// volume's filesystem mounted in another namespace; clear, the marker
// goes.
func checkHeldAfterUnmount(env *Env, volumeID string, busy func(holders []nsHolder) error) error {
	rec, ok, err := readHeld(env, volumeID)
	if err != nil {
		return fmt.Errorf("volume %s: %w", volumeID, err)
	}
	if !ok {
		return nil
	}
	if hs := stillHeld(rec); len(hs) > 0 {
		return busy(hs)
	}
	if err := os.Remove(heldMarker(env, volumeID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume %s: %w", volumeID, err)
	}
	return nil
}

// heldOf lists the volumes whose marker names posixUser.
func heldOf(env *Env, posixUser string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(env.StateDir, "volume-held-*"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		id := strings.TrimPrefix(filepath.Base(n), "volume-held-")
		rec, ok, err := readHeld(env, id)
		if err != nil {
			return nil, err
		}
		if ok && rec.User == posixUser {
			out = append(out, id)
		}
	}
	return out, nil
}

// afterUnmount looks for the filesystem of rec (unmounted on the node a
// moment ago) in every mount namespace: one still has it, the volume is
// marked held (heldMarker) and the unmount reported busy
// (hostenv.ErrVolumeBusy), to be retried.
func afterUnmount(env *Env, volumeID string, rec heldRecord) error {
	hs := stillHeld(rec)
	if len(hs) == 0 {
		return nil
	}
	if err := markHeld(env, volumeID, rec); err != nil {
		return fmt.Errorf("volume %s: %w", volumeID, err)
	}
	return &heldError{volumeID: volumeID, pids: holderPids(hs)}
}

// unmountHeld unmounts volume id on the node and looks again, as
// afterUnmount does, with rec its device before (nil: it was not
// mounted). The volume store refuses to let go of an image whose loop
// device stays open (volume.ErrMounted): that is a filesystem live
// elsewhere too, marked held when a mount table still shows it, and
// busy either way — retried, never reported detached.
func unmountHeld(ctx context.Context, env *Env, id string, rec *heldRecord) error {
	err := env.Volumes.Unmount(ctx, id)
	if err != nil && (rec == nil || !errors.Is(err, volume.ErrMounted)) {
		return err
	}
	if rec == nil {
		return nil
	}
	if herr := afterUnmount(env, id, *rec); herr != nil {
		return herr
	}
	if err != nil {
		// Held by something no check above names: marked all the same,
		// so the retry does not take "not mounted" for detached.
		if merr := markHeld(env, id, *rec); merr != nil {
			return fmt.Errorf("volume %s: %w", id, merr)
		}
		return fmt.Errorf("%w: %w", hostenv.ErrVolumeBusy, err)
	}
	return nil
}

// heldError is a volume unmounted on the node whose filesystem is still
// mounted in other namespaces.
type heldError struct{ volumeID, pids string }

func (e *heldError) Error() string {
	return fmt.Sprintf("volume %s is unmounted on the node, still mounted in the mount namespaces of processes %s", e.volumeID, e.pids)
}

// Unwrap makes it hostenv.ErrVolumeBusy.
func (e *heldError) Unwrap() error { return hostenv.ErrVolumeBusy }
