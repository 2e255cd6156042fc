package tasks_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// podmanHost is a bare-metal sim host whose allocation users are real
// POSIX accounts (sim.Options.SystemUsers): rootless podman runs as them.
// It skips without root or podman, runc and usermod.
func podmanHost(t *testing.T) (*sim.Host, *tasks.Env) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("workloads run as sim system users, which need root (useradd)")
	}
	for _, tool := range []string{"podman", "runc", "usermod", "useradd", "newuidmap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	parent, err := os.MkdirTemp("/var/lib", "gpuaas-tasks-wl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := sim.NewHostWith(filepath.Join(parent, "state"), sim.H100Baremetal8(), "sim-wl", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	env := h.Env("n-test", testutil.Logger(t))
	// The volume root an attach made a shared mount (volume_share.go),
	// let go after the test's volumes.
	t.Cleanup(func() { _ = exec.Command("umount", "-l", env.VolumeRoot).Run() })
	return h, env
}

// asTenant runs podman args as the allocation's user through its
// environment, as the renter's own session would.
func asTenant(t *testing.T, env *tasks.Env, alloc string, args ...string) string {
	t.Helper()
	e, err := env.Envs.Open(context.Background(), hostenv.Alloc{ID: alloc, PosixUser: api.PosixUser(alloc)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := workload.Podman{Env: e}.Run(context.Background(), nil, args...)
	if err != nil || r.Code != 0 {
		t.Fatalf("podman %v as %s: %v %+v", args, alloc, err, r)
	}
	return r.Stdout
}

func wlReport(t *testing.T, out any, err error) hostproto.WorkloadReport {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := out.(hostproto.WorkloadReport)
	if !ok {
		t.Fatalf("result %T; want hostproto.WorkloadReport", out)
	}
	return r
}

func wlStatus(t *testing.T, env *tasks.Env, alloc, id string) hostproto.WorkloadReport {
	t.Helper()
	out, _, err := run(t, env, api.TaskWorkloadStatus, hostproto.WorkloadStatusParams{WorkloadID: id, AllocationID: alloc, PosixUser: api.PosixUser(alloc)})
	return wlReport(t, out, err)
}

// TestWorkloadLifecycleWithRealPodman runs the wlapp image from an
// in-process registry as two tenants' rootless containers: the first
// start pulls into the node's cache, later starts of the digest do not;
// a command exiting 1 is reported exited 1 with its last lines; stop
// sends SIGTERM; tenant B sees none of A's containers or images; and
// releasing A leaves no container, process or subordinate id range of
// it while B's workload runs on.
func TestWorkloadLifecycleWithRealPodman(t *testing.T) {
	_, env := podmanHost(t)
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	// An image that runs as a non-root user (as many do: USER 1000): on
	// the node its processes run as one of the allocation's subordinate
	// uids, which ending the allocation user's own processes misses.
	refUser := workloadtest.PushAs(t, reg, "test/wlapp-user", "1000", nil)
	pid := strconv.Itoa(os.Getpid())
	allocA, allocB := "a-wla"+pid, "a-wlb"+pid
	a, b := provisionTenant(t, env, allocA), provisionTenant(t, env, allocB)
	// Workloads take stopDelay to stop after SIGTERM, longer than the
	// release's own SIGTERM-then-SIGKILL of a user's processes
	// (host.PosixUsers.KillWait's 2s), shorter than a workload's grace.
	const stopDelay = 3 * time.Second
	// Workloads say on this listener when SIGTERM reaches them (wlapp's
	// NOTIFY, through the host network).
	notify, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	terms := make(chan string, 16)
	go func() {
		for {
			c, err := notify.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			terms <- strings.TrimSpace(line)
		}
	}()
	startImage := func(alloc, id, image string, cmd ...string) hostproto.WorkloadReport {
		t.Helper()
		out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: alloc,
			PosixUser: api.PosixUser(alloc), Image: image, Command: cmd,
			Env: []string{"GREETING=" + id, "NOTIFY=" + notify.Addr().String(), "STOP_DELAY=" + stopDelay.String()}})
		return wlReport(t, out, err)
	}
	start := func(alloc, id string, cmd ...string) hostproto.WorkloadReport {
		t.Helper()
		return startImage(alloc, id, ref, cmd...)
	}

	r := start(allocA, "w-serve", workloadtest.App, "serve")
	if r.State != api.ContainerRunning || !r.Pulled || r.Container != "gpuaas-w-serve" {
		t.Fatalf("first start: %+v; want running, pulled", r)
	}
	// Delivered again: the same container, nothing pulled.
	if r = start(allocA, "w-serve", workloadtest.App, "serve"); r.State != api.ContainerRunning || r.Pulled {
		t.Fatalf("start again: %+v; want running, not pulled", r)
	}
	testutil.Eventually(t, "the app's first line", func() bool {
		r = wlStatus(t, env, allocA, "w-serve")
		return len(r.LastLines) > 0
	})
	if !strings.Contains(strings.Join(r.LastLines, "\n"), "serving as uid 0, GREETING=w-serve") {
		t.Errorf("last lines %q; want the app's greeting", r.LastLines)
	}
	labels := asTenant(t, env, allocA, "ps", "--format", "{{.Names}} {{.Labels}}")
	if !strings.Contains(labels, "gpuaas.allocation:"+allocA) || !strings.Contains(labels, "gpuaas.workload:w-serve") {
		t.Errorf("A's containers: %q; want the labels naming allocation and workload", labels)
	}

	// B, before its own start, sees nothing of A's.
	if ps, imgs := asTenant(t, env, allocB, "ps", "-a", "-q"), asTenant(t, env, allocB, "images", "-q"); ps != "" || imgs != "" {
		t.Errorf("B sees containers %q and images %q of A's", ps, imgs)
	}
	// The same digest for B: from the node's cache.
	if r = start(allocB, "w-b", workloadtest.App, "serve"); r.State != api.ContainerRunning || r.Pulled {
		t.Fatalf("B's start: %+v; want running from the cache", r)
	}
	if ps := asTenant(t, env, allocB, "ps", "-a", "--format", "{{.Names}}"); strings.TrimSpace(ps) != "gpuaas-w-b" {
		t.Errorf("B's containers: %q; want only its own", ps)
	}

	// A command that exits 1: exited 1, its last lines.
	start(allocA, "w-fail", workloadtest.App, "exit", "1")
	testutil.Eventually(t, "the failing workload to exit", func() bool {
		r = wlStatus(t, env, allocA, "w-fail")
		return r.State == api.ContainerExited
	})
	if !r.Failed() || r.ExitCode != 1 || len(r.LastLines) != 3 || r.LastLines[2] != "line 3 of a workload that exits 1" || r.FinishedAt == nil {
		t.Errorf("failed workload: %+v; want exited 1 with its three lines", r)
	}

	// Stop: SIGTERM, the app ends by itself with 0.
	out, _, err := run(t, env, api.TaskWorkloadStop, hostproto.WorkloadStopParams{WorkloadID: "w-serve", AllocationID: allocA,
		PosixUser: a.name, Grace: 10 * time.Second})
	if r = wlReport(t, out, err); r.State != api.ContainerExited || r.ExitCode != 0 || !strings.Contains(strings.Join(r.LastLines, "\n"), "got SIGTERM") {
		t.Errorf("stopped: %+v; want exited 0 after SIGTERM", r)
	}
	select {
	case got := <-terms:
		if got != "SIGTERM w-serve" {
			t.Errorf("notified %q; want w-serve's SIGTERM", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("w-serve said nothing of SIGTERM")
	}
	if r = startImage(allocA, "w-user", refUser, workloadtest.App, "serve"); r.State != api.ContainerRunning {
		t.Fatalf("USER 1000 image: %+v; want running", r)
	}
	// Container uid 0 is the user's own uid, 1… are its range's from the
	// first: uid 1000 is first+999.
	first := subUIDFirst(t, a.name)
	if procs := processesIn(t, first+999, first+1000); procs == "" {
		t.Fatalf("no process of the USER 1000 container as subordinate uid %d", first+999)
	}

	// Release A: its running workload is stopped with its grace (podman
	// stop), not killed with the user's processes; then nothing of A
	// remains; B runs on.
	// A podman of A's still runs at release (as a workload.status's
	// inspect may): usermod refuses to change the ranges of a user with
	// processes, so the release ends them first.
	ea, err := env.Envs.Open(context.Background(), hostenv.Alloc{ID: allocA, PosixUser: a.name})
	if err != nil {
		t.Fatal(err)
	}
	events, err := ea.Exec(context.Background(), hostenv.ExecSpec{Argv: []string{"podman", "events"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, env, api.TaskDeprovisionUser, hostproto.UserDeprovisionParams{AllocationID: allocA, PosixUser: a.name}); err != nil {
		events.Signal(9)
		t.Fatal(err)
	}
	events.Wait() // the release ended it; reaped here, its parent
	select {
	case got := <-terms:
		if got != "SIGTERM w-user" {
			t.Errorf("notified %q at release; want w-user's SIGTERM", got)
		}
	case <-time.After(10 * time.Second):
		// Its connection is accepted before podman sees it exit.
		t.Errorf("releasing A did not give its workload its grace to stop after SIGTERM")
	}
	if has, err := (workload.SubIDs{}).Has(a.name); err != nil || has {
		t.Errorf("A's subordinate ids after release: %v, %v; want none", has, err)
	}
	subuid, _ := os.ReadFile("/etc/subuid")
	if strings.Contains(string(subuid), a.name+":") {
		t.Errorf("/etc/subuid still names %s", a.name)
	}
	if procs := processesOf(t, a.uid); procs != "" {
		t.Errorf("processes of A after release:\n%s", procs)
	}
	if procs := processesIn(t, first, first+workload.SubIDSize); procs != "" {
		t.Errorf("processes of A's subordinate uids after release:\n%s", procs)
	}
	if r = wlStatus(t, env, allocB, "w-b"); r.State != api.ContainerRunning {
		t.Errorf("B's workload after A's release: %+v; want running", r)
	}
	_ = b
}

// subUIDFirst is the first uid of user's subordinate range.
func subUIDFirst(t *testing.T, user string) int {
	t.Helper()
	data, err := os.ReadFile("/etc/subuid")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); len(f) == 3 && f[0] == user {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no subordinate uids of %s", user)
	return 0
}

// processesIn lists the node's processes whose uid is in [from, to).
func processesIn(t *testing.T, from, to int) string {
	t.Helper()
	// A zombie (state Z) has ended: it holds nothing of the user's but its
	// pid until its parent reaps it.
	out, err := exec.Command("ps", "-e", "-o", "uid=,pid=,stat=,args=").Output()
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) > 2 && strings.HasPrefix(f[2], "Z") {
			continue
		}
		if uid, err := strconv.Atoi(f[0]); err == nil && uid >= from && uid < to {
			in = append(in, line)
		}
	}
	return strings.Join(in, "\n")
}

// processesOf lists the node's processes running as uid, zombies left out.
func processesOf(t *testing.T, uid int) string {
	t.Helper()
	out, err := exec.Command("ps", "-o", "pid,uid,stat,args", "--no-headers", "-u", strconv.Itoa(uid)).Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatal(err)
	}
	var live []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 2 && !strings.HasPrefix(f[2], "Z") { // a zombie has ended (processesIn)
			live = append(live, line)
		}
	}
	return strings.Join(live, "\n")
}

// TestWorkloadStartRefusals: a tag without a digest and a bad workload id
// are invalid params and pull nothing; a sandbox user (hostd itself, no
// account of its own) runs no podman.
func TestWorkloadStartRefusals(t *testing.T) {
	t.Parallel()
	_, env := simHost(t, sim.H100Baremetal8())
	const alloc = "a-wlref000001"
	user := api.PosixUser(alloc)
	if _, _, err := run(t, env, api.TaskProvisionUser, hostproto.UserProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: user}); err != nil {
		t.Fatal(err)
	}
	digest := "127.0.0.1:1/x/y@sha256:" + strings.Repeat("a", 64)
	for _, p := range []hostproto.WorkloadStartParams{
		{WorkloadID: "w-1", AllocationID: alloc, PosixUser: user, Image: "127.0.0.1:1/x/y:latest"},
		{WorkloadID: "w-1", AllocationID: alloc, PosixUser: user, Image: "x/y"},
		{WorkloadID: "W 1", AllocationID: alloc, PosixUser: user, Image: digest},
		{WorkloadID: "w-1", AllocationID: alloc, PosixUser: "root;", Image: digest},
	} {
		_, _, err := run(t, env, api.TaskWorkloadStart, p)
		if !errors.Is(err, tasks.ErrInvalidParams) {
			t.Errorf("%+v: %v; want ErrInvalidParams", p, err)
		}
	}
	_, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: "w-1", AllocationID: alloc, PosixUser: user, Image: digest})
	if !errors.Is(err, workload.ErrNotTenant) {
		t.Errorf("sandbox user: %v; want ErrNotTenant", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(env.StateDir, "workload-images")); len(entries) != 0 {
		t.Errorf("refused starts left %d entries in the image cache", len(entries))
	}
}
