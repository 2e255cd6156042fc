package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Each allocation's processes run in a cgroup of their own
// (docs/decisions/0003-tenant-isolation.md), made by hostd below its own
// cgroup, never elsewhere in the hierarchy: <own>/<Name>/<user>. The
// allocations' parent, <own>/<Name>, holds the limit they share (the
// node's memory minus what the platform keeps), and each allocation the
// same limit again, so its own counters say when it hit it. The
// tenant-init helper joins the allocation's cgroup before it drops to the
// user, so nothing the tenant starts is outside it, and release kills
// everything in it, whatever uid it runs as, before removing it.
//
// cgroup v2 (one unified hierarchy): hostd's cgroup must be delegated to
// it (systemd's Delegate=yes); hostd moves itself into a leaf, <own>/hostd,
// as the no-internal-processes rule requires of a cgroup whose children
// have controllers, and gives that leaf a higher cpu.weight than the
// allocations'. cgroup v1 (and hybrid nodes, whose memory controller is
// v1): the memory and pids hierarchies, and the unified one for
// cgroup.kill when there is one.

// DefaultCgroupName is the directory below hostd's own cgroup that holds
// the allocations' cgroups.
const DefaultCgroupName = "gpuaas-tenants"

// agentLeaf is the cgroup v2 leaf hostd moves itself into.
const agentLeaf = "hostd"

// agentCPUWeight is hostd's cpu.weight on cgroup v2, against the
// allocations' default of 100: the tenant rents the node's CPUs and
// keeps them, but hostd is served first when it has work.
const agentCPUWeight = "1000"

// minMemoryReserve is the least memory kept for the platform.
const minMemoryReserve = 1 << 30

// CgroupConfig is how OpenCgroups makes allocations' cgroups.
type CgroupConfig struct {
	// Name is the directory below hostd's own cgroup that holds them;
	// empty means DefaultCgroupName.
	Name string
	// MemoryReserve is the memory, in bytes, kept out of the tenants'
	// reach for hostd and the rest of the platform; 0 means the larger
	// of 1 GiB and 5% of the node's memory.
	MemoryReserve int64
	// MemoryMax, when positive, is the tenants' memory limit in bytes,
	// in place of the node's memory minus MemoryReserve.
	MemoryMax int64
	// MaxProcs is each allocation's pids limit (and the allocations'
	// together); 0 means half of kernel.pid_max.
	MaxProcs uint64
	// Version is 0 to use what the node has, or 1 or 2 to use only that
	// cgroup version.
	Version int
}

// Cgroups makes, and removes, the allocations' cgroups.
type Cgroups struct {
	version int
	// memDir, pidsDir and killDir are the allocations' parent in the
	// hierarchies of the memory and pids controllers and the one with
	// cgroup.kill: one directory on cgroup v2; pidsDir or killDir is
	// empty when there is none.
	memDir, pidsDir, killDir string
	memoryMax                int64
	maxProcs                 uint64
	// Warnings are what OpenCgroups found amiss without giving up.
	Warnings []string
}

// Version is the cgroup version in use, 1 or 2.
func (c *Cgroups) Version() int { return c.version }

// MemoryMax is the tenants' memory limit in bytes.
func (c *Cgroups) MemoryMax() int64 { return c.memoryMax }

// MaxProcs is each allocation's pids limit.
func (c *Cgroups) MaxProcs() uint64 { return c.maxProcs }

// parents are the allocations' parent directories, each once.
func (c *Cgroups) parents() []string {
	var out []string
	for _, d := range []string{c.memDir, c.pidsDir, c.killDir} {
		if d != "" && !contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Dirs are the user's cgroup directories, one per hierarchy.
func (c *Cgroups) Dirs(user string) []string {
	var out []string
	for _, p := range c.parents() {
		out = append(out, filepath.Join(p, user))
	}
	return out
}

// Create makes (or keeps) the user's cgroup with its limits and returns
// the cgroup.procs files a process writes its pid to to join it.
func (c *Cgroups) Create(user string) ([]string, error) {
	if err := CheckUserName(user); err != nil {
		return nil, err
	}
	var procs []string
	for _, p := range c.parents() {
		d := filepath.Join(p, user)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create cgroup %s: %w", d, err)
		}
		if err := c.limit(p, d); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", d, err)
		}
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	return procs, nil
}

// limit sets a cgroup's limits: dir is in the hierarchy whose allocations'
// parent is parent.
func (c *Cgroups) limit(parent, dir string) error {
	if parent == c.memDir {
		if err := writeCgroup(dir, c.memoryFile(), strconv.FormatInt(c.memoryMax, 10)); err != nil {
			return err
		}
	}
	if parent == c.pidsDir {
		if err := writeCgroup(dir, "pids.max", strconv.FormatUint(c.maxProcs, 10)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cgroups) memoryFile() string {
	if c.version == 2 {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}

// Members lists the processes in the user's cgroup.
func (c *Cgroups) Members(user string) ([]int, error) {
	if err := CheckUserName(user); err != nil {
		return nil, err
	}
	return c.members(user)
}

func (c *Cgroups) members(user string) ([]int, error) {
	self := os.Getpid()
	var out []int
	for _, d := range c.Dirs(user) {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list cgroup %s: %w", d, err)
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != self && !containsInt(out, pid) {
				out = append(out, pid)
			}
		}
	}
	return out, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Kill ends every process in the user's cgroup, whatever uid it runs as
// and however it left its session: cgroup.kill where the kernel has it
// (one pass that a fork cannot outrun), SIGKILL to each member round
// after round otherwise, until none is left (ErrProcessesLeft after
// killDeadline). A user without a cgroup is not an error.
func (c *Cgroups) Kill(ctx context.Context, user string) error {
	if err := CheckUserName(user); err != nil {
		return err
	}
	return killUntilGone(ctx, "cgroup "+user, func() ([]int, error) { return c.members(user) },
		func() { c.killOnce(user) })
}

// killOnce writes cgroup.kill of the user's cgroup, where there is one.
func (c *Cgroups) killOnce(user string) {
	if c.killDir != "" {
		_ = writeCgroup(filepath.Join(c.killDir, user), "cgroup.kill", "1")
	}
}

// Remove kills what is in the user's cgroup (Kill) and removes it. A
// user without a cgroup is not an error.
func (c *Cgroups) Remove(ctx context.Context, user string) error {
	if err := c.Kill(ctx, user); err != nil {
		return err
	}
	var errs []error
	for _, d := range c.Dirs(user) {
		errs = append(errs, removeCgroup(ctx, d))
	}
	return errors.Join(errs...)
}

// removeCgroup removes an empty cgroup; the kernel may refuse (EBUSY)
// for a moment after its last process has gone.
func removeCgroup(ctx context.Context, dir string) error {
	deadline := time.Now().Add(killDeadline)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove cgroup %s: %w", dir, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// JoinCgroups moves this process into the cgroups whose cgroup.procs
// files are procs (what Create returned): the tenant-init helper's first
// step, before it drops to the user.
func JoinCgroups(procs []string) error {
	pid := strconv.Itoa(os.Getpid())
	for _, p := range procs {
		if err := writeCgroup(filepath.Dir(p), filepath.Base(p), pid); err != nil {
			return fmt.Errorf("join cgroup %s: %w", filepath.Dir(p), err)
		}
	}
	return nil
}
