package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The helper's work between its new namespaces and the exec (see
// tenantinit_linux.go).

// isolateSelf sets up the namespaces this process was made with and
// becomes the user.
func isolateSelf(s initSpec) error {
	if s.UID == 0 {
		return fmt.Errorf("refusing to run as root")
	}
	// First, while still root: everything from here on, and all the
	// tenant starts, is in the allocation's cgroup.
	if err := JoinCgroups(s.Cgroups); err != nil {
		return err
	}
	// Nothing mounted here reaches the node's namespace, or comes from it.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	var fds []int
	defer func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}()
	// What must stay reachable below /tmp or /var/tmp is opened before
	// they are hidden, and bound again at the same path in the private
	// ones: the forwarded agent's directory (hostd makes it in the node's
	// /tmp; opened without following a link the user may have put in its
	// place, and only if it is the user's), and a home or tenant directory
	// a sim keeps there.
	type kept struct {
		fd         int
		base, rest string
	}
	var keep []kept
	for _, p := range []string{s.AgentDir, s.Home} {
		base, rest, ok := belowTmp(p)
		if !ok {
			continue
		}
		var fd int
		var err error
		if p == s.AgentDir {
			fd, err = openUsers(p, s.UID)
		} else {
			fd, err = unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		fds = append(fds, fd)
		keep = append(keep, kept{fd, base, rest})
	}
	// Both opened before either is mounted: each may be below the other
	// (a sim keeps its tenant directories in /tmp).
	var over []kept
	for _, b := range []struct{ src, dst string }{{s.Tmp, "/tmp"}, {s.VarTmp, "/var/tmp"}} {
		if _, err := os.Stat(b.dst); err != nil {
			continue // a node without /var/tmp
		}
		fd, err := openUsers(b.src, s.UID)
		if err != nil {
			return err
		}
		fds = append(fds, fd)
		over = append(over, kept{fd: fd, base: b.dst})
	}
	for _, o := range over {
		if err := bindOver(fdPath(o.fd), o.base); err != nil {
			return err
		}
	}
	for _, k := range keep {
		dst, err := makePath(k.base, k.rest)
		if err != nil {
			return err
		}
		fds = append(fds, dst)
		if err := unix.Mount(fdPath(k.fd), fdPath(dst), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("keep %s: %w", filepath.Join(k.base, k.rest), err)
		}
	}
	if _, err := os.Stat("/dev/shm"); err == nil {
		opts := fmt.Sprintf("mode=0700,uid=%d,gid=%d", s.UID, s.GID)
		if s.ShmSize > 0 {
			opts += ",size=" + strconv.FormatInt(s.ShmSize, 10)
		}
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount /dev/shm: %w", err)
		}
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(s.OOMScoreAdj)), 0); err != nil {
		return fmt.Errorf("oom score: %w", err)
	}
	if s.MaxProcs > 0 {
		lim := unix.Rlimit{Cur: s.MaxProcs, Max: s.MaxProcs}
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
			return fmt.Errorf("process limit: %w", err)
		}
	}
	if err := becomeUser(s); err != nil {
		return err
	}
	// As sshd: the home if the user may enter it, else /.
	if s.Home == "" || os.Chdir(s.Home) != nil {
		_ = os.Chdir("/")
	}
	return nil
}

// becomeUser drops to the user's groups, gid and uid. Go applies these to
// every thread of the process.
func becomeUser(s initSpec) error {
	groups := make([]int, len(s.Groups))
	for i, g := range s.Groups {
		groups[i] = int(g)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(int(s.GID)); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(int(s.UID)); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	return nil
}

// openUsers opens the directory p, not following a link at its last
// step, and checks that it is uid's.
func openUsers(p string, uid uint32) (int, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Uid != uid {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("%s is not the user's (%v)", p, err)
	}
	return fd, nil
}

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// belowTmp splits p into /tmp or /var/tmp and the rest, if it is below
// one of them.
func belowTmp(p string) (base, rest string, ok bool) {
	p = filepath.Clean(p)
	for _, b := range []string{"/tmp", "/var/tmp"} {
		if r, found := strings.CutPrefix(p, b+"/"); found {
			return b, r, true
		}
	}
	return "", "", false
}

// makePath makes base/rest in the private base, a directory at a time,
// root's, mode 0711, following no link the user may have put there, and
// returns the last one opened (O_PATH).
func makePath(base, rest string) (int, error) {
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", base, err)
	}
	for _, c := range strings.Split(rest, "/") {
		if err := unix.Mkdirat(fd, c, 0o711); err != nil && err != unix.EEXIST {
			_ = unix.Close(fd)
			return -1, fmt.Errorf("make %s in private %s: %w", rest, base, err)
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		_ = unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("make %s in private %s: %w", rest, base, err)
		}
		fd = next
	}
	return fd, nil
}

// bindOver binds src over dst, without set-uid programs or devices.
func bindOver(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind over %s: %w", dst, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount %s: %w", dst, err)
	}
	return nil
}
