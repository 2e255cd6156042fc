package host

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestCgroupDiscovery: hostd's own cgroup directory is found from
// mountinfo and /proc/self/cgroup, in a mount of the whole hierarchy and
// in one showing only part of it (a container's), and not at all when
// the mount does not show it.
func TestCgroupDiscovery(t *testing.T) {
	mountinfo := []byte(`25 30 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
33 25 0:28 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
35 25 0:30 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
36 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
41 25 0:33 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 25 0:34 /docker/abc /mnt/cg\040v2 rw,relatime - cgroup2 cgroup2 rw
`)
	mounts := cgroupMounts(mountinfo)
	want := []cgroupMount{
		{point: "/sys/fs/cgroup/memory", root: "/", controllers: []string{"memory"}},
		{point: "/sys/fs/cgroup/pids", root: "/", controllers: []string{"pids"}},
		{point: "/sys/fs/cgroup/cpu,cpuacct", root: "/", controllers: []string{"cpu"}},
		{point: "/sys/fs/cgroup/unified", root: "/", v2: true},
		{point: "/mnt/cg v2", root: "/docker/abc", v2: true},
	}
	if !reflect.DeepEqual(mounts, want) {
		t.Errorf("mounts:\n%+v\nwant\n%+v", mounts, want)
	}
	own := ownCgroups([]byte("9:name=systemd:/\n8:pids:/\n4:memory:/process_api/bb0a\n1:cpu,cpuacct:/\n0::/docker/abc/x\n"))
	if want := map[string]string{"name=systemd": "/", "pids": "/", "memory": "/process_api/bb0a", "cpu": "/", "cpuacct": "/", "": "/docker/abc/x"}; !reflect.DeepEqual(own, want) {
		t.Errorf("own cgroups %v; want %v", own, want)
	}
	for _, c := range []struct {
		name string
		m    cgroupMount
		path string
		want string
		ok   bool
	}{
		{"whole hierarchy", mounts[0], own["memory"], "/sys/fs/cgroup/memory/process_api/bb0a", true},
		{"root cgroup", mounts[1], own["pids"], "/sys/fs/cgroup/pids", true},
		{"part of the hierarchy", mounts[4], own[""], "/mnt/cg v2/x", true},
		{"not shown", mounts[4], "/elsewhere", "", false},
	} {
		if got, ok := ownDir(c.m, c.path); got != c.want || ok != c.ok {
			t.Errorf("%s: got %q %v; want %q %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestTenantMemory: the tenants' limit is the node's memory minus the
// reserve (by default the larger of 1 GiB and 5%), or MemoryMax; a
// reserve that leaves nothing is refused.
func TestTenantMemory(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		name  string
		cfg   CgroupConfig
		avail int64
		want  int64
		err   bool
	}{
		{"default on a large node: 5%", CgroupConfig{}, 100 * gib, 95 * gib, false},
		{"default on a small node: 1 GiB", CgroupConfig{}, 8 * gib, 7 * gib, false},
		{"configured reserve", CgroupConfig{MemoryReserve: 3 * gib}, 100 * gib, 97 * gib, false},
		{"explicit limit", CgroupConfig{MemoryMax: 64 << 20, MemoryReserve: 3 * gib}, 100 * gib, 64 << 20, false},
		{"reserve above the node's memory", CgroupConfig{MemoryReserve: 9 * gib}, 8 * gib, 0, true},
		{"default reserve on a tiny node", CgroupConfig{}, gib / 2, 0, true},
		{"negative reserve", CgroupConfig{MemoryReserve: -1}, 8 * gib, 0, true},
	} {
		got, err := tenantMemory(c.cfg, c.avail)
		if got != c.want || (err != nil) != c.err || (err != nil && !errors.Is(err, ErrCgroupsUnavailable)) {
			t.Errorf("%s: got %d, %v; want %d, error %v", c.name, got, err, c.want, c.err)
		}
	}
}

// TestNodeWithoutUsableCgroupsWarns: where the allocations' cgroups
// cannot be made, hostd goes on without them and says so in its log,
// having made nothing.
func TestNodeWithoutUsableCgroupsWarns(t *testing.T) {
	cases := []struct {
		name string
		cfg  CgroupConfig
		want string
	}{
		{"reserve above the node's memory", CgroupConfig{Name: "gpuaas-test-nomem", MemoryReserve: 1 << 62}, "memory reserve"},
	}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil && strings.Contains(string(b), ":memory:") {
		// A node whose memory controller is v1 (hybrid): the unified
		// hierarchy has none to give.
		cases = append(cases, struct {
			name string
			cfg  CgroupConfig
			want string
		}{"cgroup v2 without the memory controller", CgroupConfig{Name: "gpuaas-test-nomem", Version: 2}, "memory controller"})
	}
	for _, c := range cases {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		if cg := nodeCgroups(c.cfg, log); cg != nil {
			t.Errorf("%s: cgroups %+v; want none", c.name, cg)
			continue
		}
		out := buf.String()
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "no per-allocation cgroups") ||
			!strings.Contains(out, ErrCgroupsUnavailable.Error()) || !strings.Contains(out, c.want) {
			t.Errorf("%s: log %q; want a warning saying why (%q)", c.name, out, c.want)
		}
		for _, d := range []string{"/sys/fs/cgroup/pids/gpuaas-test-nomem", "/sys/fs/cgroup/unified/gpuaas-test-nomem", "/sys/fs/cgroup/gpuaas-test-nomem"} {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("%s: %s was made", c.name, d)
			}
		}
	}
}
