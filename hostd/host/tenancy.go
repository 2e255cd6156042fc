package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Tenancy is how a node keeps its allocation users apart from each other
// and from the platform (docs/decisions/0003-tenant-isolation.md): a uid
// never given before, private /tmp, /var/tmp and /dev/shm and an IPC
// namespace for every process hostd starts as the user, a higher OOM
// score for those processes, a cgroup of its own for each allocation
// (memory and pids limits that leave the platform its share), and a
// release that leaves nothing of the user on the node.
type Tenancy struct {
	// UIDs gives each user a uid no account on the node had before.
	UIDs *UIDRange
	// Dir holds each user's private temporary directories,
	// Dir/<user>/{tmp,var-tmp} (the user's, 0700), which its sessions see
	// as /tmp and /var/tmp. Dir and Dir/<user> are root's, 0711: no one
	// can list them. Put it on a filesystem that does not hold hostd's
	// state (docs/operators.md, "Tenant isolation").
	Dir string
	// ShmSize is the size in bytes of each session's private /dev/shm (a
	// tmpfs); 0 means the kernel's default, half the node's memory.
	ShmSize int64
	// OOMScoreAdj is the oom_score_adj of the user's processes, so that
	// under memory pressure the kernel ends them before hostd; 0 means
	// DefaultTenantOOMScoreAdj. The user cannot lower it.
	OOMScoreAdj int
	// MaxProcs is the user's RLIMIT_NPROC (processes and threads), so a
	// fork bomb leaves hostd pids to start what it must; 0 means half of
	// kernel.pid_max.
	MaxProcs uint64
	// Cgroups, when not nil, puts each allocation's processes in a cgroup
	// of its own (cgroups.go); nil where the node's cgroups cannot be
	// used (NodeTenancy says so) and in the sim.
	Cgroups *Cgroups
}

// DefaultTenantOOMScoreAdj is the OOM score adjustment of tenants'
// processes.
const DefaultTenantOOMScoreAdj = 800

// DefaultTenancy is a real node's: uids recorded in stateDir, private
// temporary directories in tenantDir.
func DefaultTenancy(stateDir, tenantDir string) *Tenancy {
	return &Tenancy{UIDs: DefaultUIDs(stateDir), Dir: tenantDir}
}

// Isolation is what a process hostd starts as an allocation user is put
// in (Isolate).
type Isolation struct {
	// Tmp and VarTmp are the user's directories bound over /tmp and
	// /var/tmp.
	Tmp         string `json:"tmp"`
	VarTmp      string `json:"var_tmp"`
	ShmSize     int64  `json:"shm_size,omitempty"`
	OOMScoreAdj int    `json:"oom_score_adj"`
	MaxProcs    uint64 `json:"max_procs,omitempty"`
	// Cgroups are the cgroup.procs files of the allocation's cgroup, which
	// the process joins before anything else (Cgroups.Create).
	Cgroups []string `json:"cgroups,omitempty"`
}

func (t *Tenancy) userDir(name string) string { return filepath.Join(t.Dir, name) }

// Session makes (or checks) the user's private directories and returns
// how its processes are to be isolated.
func (t *Tenancy) Session(name string, uid, gid int) (*Isolation, error) {
	if err := CheckUserName(name); err != nil {
		return nil, err
	}
	if uid <= 0 {
		return nil, fmt.Errorf("%w: %s has uid %d", ErrInvalidUser, name, uid)
	}
	if err := rootDir(t.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("tenant dir: %w", err)
	}
	ud := t.userDir(name)
	if err := rootDir(ud, 0o711); err != nil {
		return nil, fmt.Errorf("tenant dir: %w", err)
	}
	iso := &Isolation{Tmp: filepath.Join(ud, "tmp"), VarTmp: filepath.Join(ud, "var-tmp"),
		ShmSize: t.ShmSize, OOMScoreAdj: t.OOMScoreAdj}
	if iso.OOMScoreAdj == 0 {
		iso.OOMScoreAdj = DefaultTenantOOMScoreAdj
	}
	if iso.MaxProcs = t.MaxProcs; iso.MaxProcs == 0 {
		iso.MaxProcs = halfPidMax()
	}
	for _, d := range []string{iso.Tmp, iso.VarTmp} {
		if err := userDir(d, uid, gid); err != nil {
			return nil, fmt.Errorf("tenant dir: %w", err)
		}
	}
	if t.Cgroups != nil {
		// A node whose cgroups work starts no tenant process outside one.
		var err error
		if iso.Cgroups, err = t.Cgroups.Create(name); err != nil {
			return nil, fmt.Errorf("tenant cgroup: %w", err)
		}
	}
	return iso, nil
}

// Release removes the user's private directories and returns how many
// of the user's files they held (the two directories included; not the
// directories of root's made in them to keep paths reachable).
func (t *Tenancy) Release(name string, uid int) (int, error) {
	if err := CheckUserName(name); err != nil {
		return 0, err
	}
	ud := t.userDir(name)
	n := 0
	_ = filepath.WalkDir(ud, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil && int(fi.Sys().(*syscall.Stat_t).Uid) == uid {
			n++
		}
		return nil
	})
	if err := os.RemoveAll(ud); err != nil {
		return 0, fmt.Errorf("remove %s: %w", ud, err)
	}
	return n, nil
}

// rootDir makes dir (not its parents) root's with mode, or checks that
// the one there is a directory of root's that no one else may write.
func rootDir(dir string, mode os.FileMode) error {
	if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s is %v owned by uid %d; want a directory of root's others cannot write", ErrTenantDir, dir, fi.Mode(), st.Uid)
	}
	return os.Chmod(dir, mode)
}

// userDir makes dir the user's, mode 0700, in a directory of root's (so
// nothing the user did can stand in for it).
func userDir(dir string, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrTenantDir, dir)
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// halfPidMax is half of kernel.pid_max, or 0 (no limit) when it cannot
// be read.
func halfPidMax() uint64 {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n / 2
}
