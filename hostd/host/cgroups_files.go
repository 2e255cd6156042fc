package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Reading and writing cgroups' control files (see cgroups.go).

// CgroupStats are an allocation's cgroup counters.
type CgroupStats struct {
	// MemoryMax is its memory limit in bytes.
	MemoryMax int64
	// MemoryHits counts the times its memory use reached its limit
	// (memory.failcnt on v1, memory.events max on v2); the kernel may
	// count a hit at the allocations' parent instead, whose limit is the
	// same.
	MemoryHits int64
	// OOMKills counts processes the kernel killed in it for memory.
	OOMKills int64
	// MaxProcs is its pids limit.
	MaxProcs uint64
}

// Stats reads the user's cgroup counters.
func (c *Cgroups) Stats(user string) (CgroupStats, error) {
	if err := CheckUserName(user); err != nil {
		return CgroupStats{}, err
	}
	mem := filepath.Join(c.memDir, user)
	var s CgroupStats
	var errs []error
	var err error
	s.MemoryMax, err = readInt(filepath.Join(mem, c.memoryFile()))
	errs = append(errs, err)
	if c.version == 2 {
		ev, err := readKeyed(filepath.Join(mem, "memory.events"))
		errs = append(errs, err)
		s.MemoryHits, s.OOMKills = ev["max"], ev["oom_kill"]
	} else {
		s.MemoryHits, err = readInt(filepath.Join(mem, "memory.failcnt"))
		errs = append(errs, err)
		oc, err := readKeyed(filepath.Join(mem, "memory.oom_control"))
		errs = append(errs, err)
		s.OOMKills = oc["oom_kill"]
	}
	if c.pidsDir != "" {
		n, err := readInt(filepath.Join(c.pidsDir, user, "pids.max"))
		errs = append(errs, err)
		s.MaxProcs = uint64(n)
	}
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("cgroup stats of %s: %w", user, err)
	}
	return s, nil
}

// writeCgroup writes value to a cgroup's control file, which must be
// there (the kernel's: nothing is created).
func writeCgroup(dir, file, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("set %s: %w", file, err)
	}
	_, werr := f.Write([]byte(value))
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("set %s: %w", file, err)
	}
	return nil
}

func readInt(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// readKeyed reads a flat-keyed cgroup file ("key value" lines).
func readKeyed(p string) (map[string]int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				out[f[0]] = n
			}
		}
	}
	return out, nil
}
