package host_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// testMemoryMax is the tenants' memory limit in these tests.
const testMemoryMax = 64 << 20

// newCgroupTenancy is newTenancy with per-allocation cgroups of its own
// (a parent cgroup named for the test, below this process's cgroups),
// limited to testMemoryMax and maxProcs; it skips where this machine's
// cgroups cannot be used.
func newCgroupTenancy(t *testing.T, maxProcs uint64) *host.Tenancy {
	t.Helper()
	needRoot(t)
	ty := newTenancy(t)
	ty.Cgroups = openTestCgroups(t, maxProcs)
	return ty
}

// openTestCgroups opens allocations' cgroups of the test's own (see
// newCgroupTenancy).
func openTestCgroups(t *testing.T, maxProcs uint64) *host.Cgroups {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	cg, err := host.OpenCgroups(host.CgroupConfig{Name: "gpuaas-test-" + hex.EncodeToString(b[:]),
		MemoryMax: testMemoryMax, MaxProcs: maxProcs})
	if errors.Is(err, host.ErrCgroupsUnavailable) {
		t.Skipf("cgroups: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The allocations' cgroups a failed test left, and their parents.
		for _, d := range cg.Dirs("x") {
			parent := filepath.Dir(d)
			entries, _ := os.ReadDir(parent)
			for _, e := range entries {
				if e.IsDir() {
					_ = cg.Remove(context.Background(), e.Name())
				}
			}
			_ = os.Remove(parent)
		}
	})
	return cg
}

// isolated is a command run as the tenant in a session isolated by iso.
func (tn tenant) isolated(t *testing.T, iso *host.Isolation, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := iso.Isolate(cmd, tn.cred, ""); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// cgroupOf is the path of pid's cgroup in the hierarchy whose
// /proc/<pid>/cgroup line has field (a v1 controller, or "" for v2).
func cgroupOf(t *testing.T, pid int, controller string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), controller) {
			return f[2]
		}
	}
	t.Fatalf("pid %d has no %q cgroup:\n%s", pid, controller, b)
	return ""
}

// TestTenantOOMKilledInItsCgroup: a tenant session that allocates more
// than the tenants' memory limit is killed by the kernel inside its
// allocation's cgroup (exit 137), whose counters show it, while this
// process (hostd's stand-in) goes on; the session's processes are in the
// allocation's cgroup, with its pids limit.
func TestTenantOOMKilledInItsCgroup(t *testing.T) {
	ty := newCgroupTenancy(t, 64)
	u := host.PosixUsers{Tenancy: ty, KillWait: 200 * time.Millisecond}
	a := newTenant(t, u)
	iso, err := ty.Session(a.name, a.uid, a.gid)
	if err != nil {
		t.Fatal(err)
	}
	if len(iso.Cgroups) == 0 {
		t.Fatal("the session has no cgroup to join")
	}

	// tail keeps a whole line in memory, and /dev/zero has no newline.
	out, err := a.isolated(t, iso, "head -c 256m /dev/zero | tail >/dev/null; echo exit=$?").CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || !strings.HasSuffix(got, "exit=137") {
		t.Errorf("256 MiB in a session limited to 64 MiB: %v\n%s\nwant tail killed (exit 137)", err, got)
	}
	st, err := ty.Cgroups.Stats(a.name)
	if err != nil {
		t.Fatal(err)
	}
	// (MemoryHits may be counted by the allocations' parent instead: the
	// kernel charges both, with the same limit.)
	if st.MemoryMax != testMemoryMax || st.OOMKills < 1 || st.MaxProcs != 64 {
		t.Errorf("cgroup stats %+v; want memory max %d, an OOM kill, pids max 64", st, testMemoryMax)
	}
	if err := syscall.Kill(os.Getpid(), 0); err != nil {
		t.Fatalf("this process: %v", err)
	}

	// A session's processes are in the allocation's cgroup.
	cmd := a.isolated(t, iso, "exec sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	waitFor(t, "the session to join its cgroup", func() bool {
		m, _ := ty.Cgroups.Members(a.name)
		return slices.Contains(m, pid)
	})
	// In every hierarchy the allocation's cgroups are in (memory, pids
	// and the unified one on v1; one on v2), and below this process's own.
	name := filepath.Base(filepath.Dir(ty.Cgroups.Dirs(a.name)[0]))
	suffix := "/" + name + "/" + a.name
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), suffix+"\n"); n != len(ty.Cgroups.Dirs(a.name)) {
		t.Errorf("the session is in %d of the allocation's %d cgroups:\n%s", n, len(ty.Cgroups.Dirs(a.name)), b)
	}
	mem := "memory"
	if ty.Cgroups.Version() == 2 {
		mem = ""
	}
	if got, want := cgroupOf(t, pid, mem), path.Join(cgroupOf(t, os.Getpid(), mem), name, a.name); got != want {
		t.Errorf("the session's memory cgroup is %s; want %s, below this process's", got, want)
	}
}

// TestReleaseRemovesTheCgroup: release kills what runs in the
// allocation's cgroup, a process that double-forked and left its
// session (setsid) included, and removes the cgroup; Delete does it for
// a user whose account is already gone too.
func TestReleaseRemovesTheCgroup(t *testing.T) {
	ty := newCgroupTenancy(t, 0)
	u := host.PosixUsers{Tenancy: ty, KillWait: 200 * time.Millisecond}
	a := newTenant(t, u)
	iso, err := ty.Session(a.name, a.uid, a.gid)
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.isolated(t, iso, "setsid sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $!'").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("pid %q: %v", out, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if m, _ := ty.Cgroups.Members(a.name); !slices.Contains(m, pid) {
		t.Fatalf("the escaped process %d is not in the allocation's cgroup (members %v)", pid, m)
	}

	// The cgroup alone: no kill by uid.
	if err := ty.Cgroups.Remove(context.Background(), a.name); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the escaped process to go", func() bool { return syscall.Kill(pid, 0) != nil })
	for _, d := range ty.Cgroups.Dirs(a.name) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s outlived the release: %v", d, err)
		}
	}

	// Through Delete: the session made the cgroup again, userdel ran
	// elsewhere, and Delete (a retry) still removes it.
	if _, err := ty.Session(a.name, a.uid, a.gid); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Command("userdel", "-r", a.name).CombinedOutput(); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Delete(context.Background(), a.name); err != nil {
		t.Fatal(err)
	}
	for _, d := range ty.Cgroups.Dirs(a.name) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s outlived Delete of a user already gone: %v", d, err)
		}
	}
}

// TestCgroupsContainAnAllocation: the cgroup mechanics alone, with no
// account (the process joins the allocation's cgroup itself, as the
// tenant-init helper does), so that they also run where there is no
// useradd (a minimal VM with cgroup v2): memory over the limit is
// OOM-killed inside the cgroup; a double-forked, setsid'ed process is a
// member, and Remove kills it and removes the cgroup. On cgroup v2 this
// process has moved into the leaf "hostd" of its cgroup (unless that is
// the root), with a cpu.weight above the allocations'.
func TestCgroupsContainAnAllocation(t *testing.T) {
	cg := openTestCgroups(t, 32)
	user := "gt-cgroup"
	procs, err := cg.Create(user)
	if err != nil {
		t.Fatal(err)
	}
	join := "for f in " + strings.Join(procs, " ") + "; do echo $$ > $f || exit 1; done; "
	out, err := exec.Command("/bin/sh", "-c", join+"head -c 268435456 /dev/zero | tail >/dev/null; echo exit=$?").CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || !strings.HasSuffix(got, "exit=137") {
		t.Errorf("256 MiB in a cgroup limited to 64 MiB: %v\n%s\nwant tail killed (exit 137)", err, got)
	}
	st, err := cg.Stats(user)
	if err != nil {
		t.Fatal(err)
	}
	if st.MemoryMax != testMemoryMax || st.OOMKills < 1 || st.MaxProcs != 32 {
		t.Errorf("cgroup stats %+v; want memory max %d, an OOM kill, pids max 32", st, testMemoryMax)
	}

	out, err = exec.Command("/bin/sh", "-c", join+"setsid sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $!'").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("pid %q: %v", out, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if m, _ := cg.Members(user); !slices.Contains(m, pid) {
		t.Fatalf("the escaped process %d is not in the cgroup (members %v)", pid, m)
	}
	if err := cg.Remove(context.Background(), user); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the escaped process to go", func() bool { return syscall.Kill(pid, 0) != nil })
	for _, d := range cg.Dirs(user) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s outlived Remove: %v", d, err)
		}
	}

	if cg.Version() == 2 {
		own := cgroupOf(t, os.Getpid(), "")
		parent := filepath.Dir(filepath.Dir(cg.Dirs(user)[0]))
		if _, err := os.Stat(filepath.Join(parent, "cgroup.type")); err == nil { // not the root
			if filepath.Base(own) != "hostd" {
				t.Errorf("this process is in %s; want the leaf hostd", own)
			}
			if b, err := os.ReadFile(filepath.Join(parent, "hostd", "cpu.weight")); err != nil || strings.TrimSpace(string(b)) != "1000" {
				t.Errorf("hostd's cpu.weight: %q, %v; want 1000", b, err)
			}
		}
	}
}

// waitFor polls cond until it holds, failing after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
