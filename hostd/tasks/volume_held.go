package tasks

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A container binds a volume's mount point into a mount namespace of its
// own: its processes' cwd, root and fds name paths of that namespace, so
// processesUsing misses them, and the host's umount succeeds while the
// bind mount keeps the filesystem alive (docs/decisions/0064-volume-attach-running.md).
// What is looked for instead is the filesystem's device in the mount
// table of every mount namespace (proc(5), /proc/PID/mountinfo).

// mountDevice returns the device ("major:minor", as mountinfo names it) of
// the filesystem mounted at mp.
func mountDevice(mp string) (string, error) {
	fi, err := os.Stat(mp)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("stat %s: no device", mp)
	}
	dev := uint64(st.Dev) //nolint:unconvert // Dev is uint32 on some platforms
	return fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev)), nil
}

// mountedElsewhere lists the processes (one a mount namespace) whose
// mount table has a mount of device dev other than hostd's own mount of it
// at mp (mp "" counts every mount): a container's bind mount, a namespace
// that copied the host's mounts, or a bind mount on the host. A copy that
// is a peer or a slave of peer group group (hostd's mount's "shared:N",
// "" for none) is not counted: the node's umount propagates to it.
func mountedElsewhere(dev, mp, group string) []string {
	self, _ := os.Readlink("/proc/self/ns/mnt")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	seen := map[string]bool{}
	var out []string
	for _, pd := range procs {
		pid := filepath.Base(pd)
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		ns, err := os.Readlink(pd + "/ns/mnt")
		if err != nil || seen[ns] {
			continue // gone, or its namespace read already
		}
		seen[ns] = true
		for _, m := range mountsOfDevice(pd+"/mountinfo", dev) {
			if ns == self && m.point == mp {
				continue
			}
			if group != "" && (m.tags["shared:"+group] || m.tags["master:"+group]) {
				continue
			}
			out = append(out, pid)
			break
		}
	}
	return out
}

// peerGroup returns the peer group N of hostd's own mount of dev at mp
// ("shared:N" in /proc/self/mountinfo), "" when it is not shared.
func peerGroup(dev, mp string) string {
	for _, m := range mountsOfDevice("/proc/self/mountinfo", dev) {
		if m.point != mp {
			continue
		}
		for t := range m.tags {
			if g, ok := strings.CutPrefix(t, "shared:"); ok {
				return g
			}
		}
	}
	return ""
}

// mountEntry is a line of a mountinfo file: its mount point and optional
// fields (propagation tags).
type mountEntry struct {
	point string
	tags  map[string]bool
}

// mountsOfDevice returns the mounts of dev in mountinfo file.
func mountsOfDevice(file, dev string) []mountEntry {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// ID parent major:minor root mount-point options [optional...] - fstype source super-options
		fs := strings.Fields(sc.Text())
		if len(fs) < 7 || fs[2] != dev {
			continue
		}
		m := mountEntry{point: unescapeMount(fs[4]), tags: map[string]bool{}}
		for _, t := range fs[6:] {
			if t == "-" {
				break
			}
			m.tags[t] = true
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// heldMarker is where a detach that unmounted the volume on the node but
// found it still mounted in another namespace keeps its device, so that
// the retry (the volume no longer mounted on the node) looks again
// instead of reporting it detached.
func heldMarker(env *Env, volumeID string) string {
	return filepath.Join(env.StateDir, "volume-held-"+volumeID)
}

// checkHeldAfterUnmount reports busy while a detach's earlier unmount
// left the volume's filesystem mounted in another namespace; clear, the
// marker goes.
func checkHeldAfterUnmount(env *Env, volumeID string, busy func(pids []string) error) error {
	b, err := os.ReadFile(heldMarker(env, volumeID))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("detach volume: %w", err)
	}
	dev, group, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if pids := mountedElsewhere(dev, "", group); len(pids) > 0 {
		return busy(pids)
	}
	if err := os.Remove(heldMarker(env, volumeID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("detach volume: %w", err)
	}
	return nil
}
