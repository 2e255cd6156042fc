package host

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/internal/mountinfo"
)

// Finding hostd's own cgroups and making the allocations' parent below
// them (see cgroups.go).

// ErrCgroupsUnavailable is OpenCgroups' finding that this node's cgroups
// cannot hold allocations (no memory controller, a cgroup hostd may not
// manage): the node keeps working without per-allocation limits, and
// hostd says so (NodeTenancy).
var ErrCgroupsUnavailable = errors.New("per-allocation cgroups unavailable")

// cgroupMount is a cgroup filesystem: where it is mounted, which part of
// the hierarchy is there, and its controllers (v1; none for cgroup2).
type cgroupMount struct {
	point, root string
	v2          bool
	controllers []string
}

// cgroupMounts lists the cgroup filesystems in mount table mi.
func cgroupMounts(mi []byte) []cgroupMount {
	var out []cgroupMount
	ms, _ := mountinfo.Parse(bytes.NewReader(mi))
	for _, mnt := range ms {
		if mnt.FSType != "cgroup" && mnt.FSType != "cgroup2" {
			continue
		}
		m := cgroupMount{point: mnt.Point, root: mnt.Root, v2: mnt.FSType == "cgroup2"}
		if !m.v2 {
			for _, o := range strings.Split(mnt.SuperOptions, ",") {
				if o == "memory" || o == "pids" || o == "cpu" {
					m.controllers = append(m.controllers, o)
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// ownCgroups reads /proc/self/cgroup: each v1 controller's path, and the
// unified hierarchy's under "".
func ownCgroups(procCgroup []byte) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(string(procCgroup), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			out[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out
}

// ownDir is the directory of hostd's cgroup path in mount m; false when
// the mount does not show it (a cgroup namespace or bind mount that
// leaves it out).
func ownDir(m cgroupMount, path string) (string, bool) {
	rel, err := filepath.Rel(m.root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.Join(m.point, rel), true
}

// OpenCgroups finds hostd's own cgroups and makes (or keeps) the
// allocations' parent below them, with the tenants' memory and pids
// limits. ErrCgroupsUnavailable says why it cannot.
func OpenCgroups(cfg CgroupConfig) (*Cgroups, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultCgroupName
	}
	if cfg.Name != filepath.Base(cfg.Name) || cfg.Name == agentLeaf || strings.HasPrefix(cfg.Name, ".") {
		return nil, fmt.Errorf("%w: cgroup name %q", ErrInvalidUser, cfg.Name)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCgroupsUnavailable, err)
	}
	pc, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCgroupsUnavailable, err)
	}
	mounts, own := cgroupMounts(mi), ownCgroups(pc)
	c := &Cgroups{maxProcs: cfg.MaxProcs}
	if c.maxProcs == 0 {
		c.maxProcs = halfPidMax()
	}
	var v1Mem, v1Pids, unified string
	for _, m := range mounts {
		if m.v2 {
			if d, ok := ownDir(m, own[""]); ok && unified == "" && own[""] != "" {
				unified = d
			}
			continue
		}
		for _, ctl := range m.controllers {
			d, ok := ownDir(m, own[ctl])
			if !ok || own[ctl] == "" {
				continue
			}
			switch {
			case ctl == "memory" && v1Mem == "":
				v1Mem = d
			case ctl == "pids" && v1Pids == "":
				v1Pids = d
			}
		}
	}
	switch {
	case v1Mem != "" && cfg.Version != 2:
		err = c.openV1(cfg, v1Mem, v1Pids, unified)
	case unified != "" && cfg.Version != 1:
		err = c.openV2(cfg, unified)
	default:
		err = fmt.Errorf("%w: no cgroup memory controller mounted for this process (cgroup version %d)", ErrCgroupsUnavailable, cfg.Version)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// openV1 uses the v1 memory and pids hierarchies, and the unified one of a
// hybrid node for cgroup.kill.
func (c *Cgroups) openV1(cfg CgroupConfig, mem, pids, unified string) error {
	c.version = 1
	avail, err := availableMemory(filepath.Join(mem, "memory.limit_in_bytes"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCgroupsUnavailable, err)
	}
	if c.memoryMax, err = tenantMemory(cfg, avail); err != nil {
		return err
	}
	c.memDir = filepath.Join(mem, cfg.Name)
	if err := makeParent(c.memDir); err != nil {
		return err
	}
	// Hierarchical accounting (always on in recent kernels): the parent's
	// limit holds for all allocations together.
	if b, err := os.ReadFile(filepath.Join(c.memDir, "memory.use_hierarchy")); err == nil && strings.TrimSpace(string(b)) == "0" {
		_ = writeCgroup(c.memDir, "memory.use_hierarchy", "1")
	}
	if err := writeCgroup(c.memDir, "memory.limit_in_bytes", strconv.FormatInt(c.memoryMax, 10)); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCgroupsUnavailable, c.memDir, err)
	}
	if pids == "" {
		c.Warnings = append(c.Warnings, "no cgroup pids controller: each allocation's processes are bounded by RLIMIT_NPROC only")
	} else {
		c.pidsDir = filepath.Join(pids, cfg.Name)
		if err := makeParent(c.pidsDir); err != nil {
			return err
		}
		if err := writeCgroup(c.pidsDir, "pids.max", strconv.FormatUint(c.maxProcs, 10)); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrCgroupsUnavailable, c.pidsDir, err)
		}
	}
	if unified != "" {
		d := filepath.Join(unified, cfg.Name)
		if err := os.Mkdir(d, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			c.killDir = d
		}
	}
	if c.killDir == "" {
		c.killDir = c.memDir // no cgroup.kill there: members are killed one by one
	}
	return nil
}

// openV2 uses the unified hierarchy: hostd moves into its leaf, enables
// the memory, pids and cpu controllers for its cgroup's children, and
// makes the allocations' parent.
func (c *Cgroups) openV2(cfg CgroupConfig, own string) error {
	c.version = 2
	if filepath.Base(own) == agentLeaf { // moved there by an earlier OpenCgroups
		own = filepath.Dir(own)
	}
	ctl, err := os.ReadFile(filepath.Join(own, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCgroupsUnavailable, err)
	}
	if !contains(strings.Fields(string(ctl)), "memory") {
		return fmt.Errorf("%w: the memory controller is not available in %s (cgroup.controllers: %q); delegate the cgroup to hostd (systemd: Delegate=yes)",
			ErrCgroupsUnavailable, own, strings.TrimSpace(string(ctl)))
	}
	if !delegated(own) {
		c.Warnings = append(c.Warnings, fmt.Sprintf("cgroup %s is not marked delegated to hostd (systemd sets trusted.delegate with Delegate=yes): systemd may undo the allocations' cgroups", own))
	}
	avail, err := availableMemory(filepath.Join(own, "memory.max"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCgroupsUnavailable, err)
	}
	if c.memoryMax, err = tenantMemory(cfg, avail); err != nil {
		return err
	}
	if isRootCgroup(own) {
		// The root has no no-internal-processes rule: hostd stays.
	} else if err := moveInto(own, filepath.Join(own, agentLeaf)); err != nil {
		return fmt.Errorf("%w: %w", ErrCgroupsUnavailable, err)
	}
	if err := writeCgroup(own, "cgroup.subtree_control", "+memory"); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCgroupsUnavailable, own, err)
	}
	hasPids := writeCgroup(own, "cgroup.subtree_control", "+pids") == nil
	if writeCgroup(own, "cgroup.subtree_control", "+cpu") == nil && !isRootCgroup(own) {
		if err := writeCgroup(filepath.Join(own, agentLeaf), "cpu.weight", agentCPUWeight); err != nil {
			c.Warnings = append(c.Warnings, "hostd's cpu.weight: "+err.Error())
		}
	}
	c.memDir, c.killDir = filepath.Join(own, cfg.Name), filepath.Join(own, cfg.Name)
	if err := makeParent(c.memDir); err != nil {
		return err
	}
	sub := "+memory"
	if hasPids {
		sub += " +pids"
		c.pidsDir = c.memDir
	} else {
		c.Warnings = append(c.Warnings, "no cgroup pids controller: each allocation's processes are bounded by RLIMIT_NPROC only")
	}
	if err := writeCgroup(c.memDir, "cgroup.subtree_control", sub); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCgroupsUnavailable, c.memDir, err)
	}
	if err := writeCgroup(c.memDir, "memory.max", strconv.FormatInt(c.memoryMax, 10)); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCgroupsUnavailable, c.memDir, err)
	}
	if hasPids {
		if err := writeCgroup(c.pidsDir, "pids.max", strconv.FormatUint(c.maxProcs, 10)); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrCgroupsUnavailable, c.pidsDir, err)
		}
	}
	return nil
}

// isRootCgroup says whether dir is a hierarchy's root (it has no
// cgroup.type, as every other cgroup v2 does).
func isRootCgroup(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "cgroup.type"))
	return errors.Is(err, fs.ErrNotExist)
}

// moveInto makes leaf and moves every process of cgroup from into it.
func moveInto(from, leaf string) error {
	if err := makeParent(leaf); err != nil {
		return err
	}
	for range 100 { // processes hostd started meanwhile are in from too
		b, err := os.ReadFile(filepath.Join(from, "cgroup.procs"))
		if err != nil {
			return fmt.Errorf("list %s: %w", from, err)
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			err := writeCgroup(leaf, "cgroup.procs", p)
			if err != nil && !errors.Is(err, syscallESRCH) {
				return fmt.Errorf("move %s into %s: %w", p, leaf, err)
			}
		}
	}
	return fmt.Errorf("move processes of %s into %s: they keep coming", from, leaf)
}

func makeParent(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: create cgroup %s: %w", ErrCgroupsUnavailable, dir, err)
	}
	return nil
}
