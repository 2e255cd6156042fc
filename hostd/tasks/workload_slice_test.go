package tasks_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/logstream"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// slicePodmanHost is a gpu_slice sim host whose guests' users are real
// POSIX accounts (sim.Options.SystemUsers): rootless podman runs as them
// inside the guest, reached through its sshd. It skips as podmanHost.
func slicePodmanHost(t *testing.T) (*sim.Host, *tasks.Env) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("guests' users are sim system users, which need root (useradd)")
	}
	for _, tool := range []string{"podman", "runc", "usermod", "useradd", "newuidmap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	parent, err := os.MkdirTemp("/var/lib", "gpuaas-tasks-wls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := sim.NewHostWith(filepath.Join(parent, "state"), sim.H200Slice8(), "sim-wls", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, h.Env("n-test", testutil.Logger(t))
}

// provisionSlice boots a slice VM of alloc on slots; released at the
// end of the test if it still runs.
func provisionSlice(t *testing.T, h *sim.Host, env *tasks.Env, alloc string, s []api.Slot) {
	t.Helper()
	t.Cleanup(func() {
		_, _, _ = run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: alloc, Slots: s})
	})
	if _, rec, err := run(t, env, api.TaskVMProvision, provisionParams(h, alloc, s)); err != nil {
		t.Fatalf("vm_provision %s: %v (%v)", alloc, err, rec)
	}
}

// TestSliceWorkloadRunsInItsGuest, with real rootless podman: a workload
// of a slice runs inside the slice's guest as the guest's user (through
// the VM environment's sshd, the image streamed in over it), with
// exactly the guest's GPUs as the guest's CDI spec names them; its log
// reaches LOGS (read in the guest); stop stops it; another slice's
// guest sees none of its containers; and releasing the slice leaves no
// container process, spec or subordinate id range of it while the
// other's workload runs on.
func TestSliceWorkloadRunsInItsGuest(t *testing.T) {
	h, env := slicePodmanHost(t)
	bus := testutil.NATS(t)
	js, err := jetstream.New(bus.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(context.Background(), logstream.StreamConfig(1,
		logstream.Limits{MaxBytes: 64 << 20, MaxAge: time.Hour})); err != nil {
		t.Fatal(err)
	}
	env.Logs = js
	stopLogs := tasks.FollowWorkloadLogs(env)
	defer stopLogs()
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	pid := strconv.Itoa(os.Getpid())
	allocA, allocB := "a-sla"+pid, "a-slb"+pid
	sl := slots(t, env)
	slotsA, slotsB := sl[0:2], sl[2:3]
	provisionSlice(t, h, env, allocA, slotsA)
	provisionSlice(t, h, env, allocB, slotsB)

	start := func(alloc, id string, s []api.Slot, cmd ...string) hostproto.WorkloadReport {
		t.Helper()
		var gpus []string
		for _, x := range s {
			gpus = append(gpus, x.GPUPCI)
		}
		out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: alloc,
			PosixUser: api.PosixUser(alloc), Image: ref, GPUs: gpus, Command: cmd})
		return wlReport(t, out, err)
	}
	idA, idB := "w-sla"+pid, "w-slb"+pid
	rA := start(allocA, idA, slotsA, workloadtest.App, "serve")
	if rA.State != api.ContainerRunning || !rA.Pulled {
		t.Fatalf("A's start: %+v; want running, pulled", rA)
	}
	if want := []string{workload.CDIKind + "=" + allocA + "-0", workload.CDIKind + "=" + allocA + "-1"}; !slices.Equal(rA.Devices, want) {
		t.Errorf("A's devices %v; want %v", rA.Devices, want)
	}
	if rB := start(allocB, idB, slotsB, workloadtest.App, "serve"); rB.State != api.ContainerRunning || len(rB.Devices) != 1 {
		t.Fatalf("B's start: %+v; want running with one GPU", rB)
	}

	// The container is the guest user's: its conmon runs as the guest's
	// account, and it has the guest's two GPUs and the control nodes.
	guestA, err := user.Lookup(api.PosixUser(allocA))
	if err != nil {
		t.Fatalf("A's guest user: %v", err)
	}
	ctrPID := strings.TrimSpace(asTenant(t, env, allocA, "container", "inspect", "--format", "{{.State.Pid}}", workload.ContainerName(idA)))
	got, _ := mountedGPUNodes(t, ctrPID)
	if want := []string{"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"}; !slices.Equal(got, want) {
		t.Errorf("GPU nodes in A's container %v; want %v", got, want)
	}
	if owner := procOwner(t, procParent(t, ctrPID)); owner != guestA.Uid {
		t.Errorf("A's container's conmon runs as uid %s; want the guest user's %s", owner, guestA.Uid)
	}
	if r := wlStatus(t, env, allocA, idA); r.State != api.ContainerRunning || len(r.LastLines) != 1 || !strings.HasPrefix(r.LastLines[0], "serving as uid 0") {
		t.Errorf("A's status: %+v; want running, serving as the container's root", r)
	}

	// Its output reaches LOGS, read in the guest.
	idLog := "w-sll" + pid
	if r := start(allocA, idLog, nil, workloadtest.App, "count", "12", "10ms"); r.State == api.ContainerMissing {
		t.Fatalf("counter's start: %+v", r)
	}
	testutil.Eventually(t, "the counter's 12 lines in LOGS", func() bool {
		return len(readWorkloadLog(t, js, env.NodeID, idLog)) == 12
	})
	if l := readWorkloadLog(t, js, env.NodeID, idLog); l[11].Text != "n 12" || l[11].Stream != logstream.Stderr {
		t.Errorf("last line %+v; want n 12 on stderr", l[11])
	}

	// B's guest has none of A's containers.
	if names := asTenant(t, env, allocB, "ps", "--all", "--format", "{{.Names}}"); strings.Contains(names, idA) || !strings.Contains(names, idB) {
		t.Errorf("B's containers %q; want B's only", names)
	}

	// Stop: SIGTERM reaches it, it is exited with its last line; removed
	// then, it is gone.
	idStop := "w-sls" + pid
	if r := start(allocA, idStop, nil, workloadtest.App, "serve"); r.State != api.ContainerRunning {
		t.Fatalf("start: %+v; want running", r)
	}
	out, _, err := run(t, env, api.TaskWorkloadStop, hostproto.WorkloadStopParams{WorkloadID: idStop, AllocationID: allocA,
		PosixUser: api.PosixUser(allocA), Grace: 5 * time.Second})
	if r := wlReport(t, out, err); r.State != api.ContainerExited || !slices.Contains(r.LastLines, "got SIGTERM") {
		t.Errorf("stop: %+v; want exited after SIGTERM", r)
	}
	out, _, err = run(t, env, api.TaskWorkloadStop, hostproto.WorkloadStopParams{WorkloadID: idStop, AllocationID: allocA,
		PosixUser: api.PosixUser(allocA), Remove: true})
	if r := wlReport(t, out, err); r.State != api.ContainerMissing {
		t.Errorf("remove: %+v; want missing", r)
	}

	// Release A: its container's processes, spec and ranges go.
	if _, _, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: allocA, Slots: slotsA}); err != nil {
		t.Fatal(err)
	}
	// Stopped in the guest before its power-off: SIGTERM reached it and
	// its last line is in LOGS.
	if l := readWorkloadLog(t, js, env.NodeID, idA); len(l) != 2 || l[1].Text != "got SIGTERM" {
		t.Errorf("A's workload's log after release: %+v; want its first line and the one after SIGTERM", l)
	}
	if _, err := os.Stat(filepath.Join("/proc", ctrPID)); !os.IsNotExist(err) {
		t.Errorf("A's container process after release: %v; want gone", err)
	}
	if _, err := os.Stat(workload.CDISpecPath(workload.CDIDir, allocA)); !os.IsNotExist(err) {
		t.Errorf("A's guest CDI spec after release: %v; want gone", err)
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), api.PosixUser(allocA)+":") {
			t.Errorf("%s still has A's guest user's range", f)
		}
	}
	if r := wlStatus(t, env, allocB, idB); r.State != api.ContainerRunning {
		t.Errorf("B's workload after A's release: %s; want running", r.State)
	}
}

// TestSliceWorkloadNeedsTheGuestsSubIDs: a guest whose user has no
// subordinate id range (an image whose useradd gave none) refuses the
// start naming it; nothing is started.
func TestSliceWorkloadNeedsTheGuestsSubIDs(t *testing.T) {
	h, env := slicePodmanHost(t)
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	alloc := "a-sln" + strconv.Itoa(os.Getpid())
	s := slots(t, env)[:1]
	provisionSlice(t, h, env, alloc, s)
	if out, err := exec.Command("usermod", "--del-subuids", "1-4294967294", "--del-subgids", "1-4294967294",
		api.PosixUser(alloc)).CombinedOutput(); err != nil {
		t.Fatalf("usermod: %v: %s", err, out)
	}
	_, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: "w-sln", AllocationID: alloc,
		PosixUser: api.PosixUser(alloc), Image: ref, GPUs: []string{s[0].GPUPCI}})
	if err == nil || !strings.Contains(err.Error(), "subordinate id range") {
		t.Fatalf("start in a guest without subordinate ids: %v; want refused naming them", err)
	}
	if r := wlStatus(t, env, alloc, "w-sln"); r.State != api.ContainerMissing {
		t.Errorf("container after the refusal: %s; want missing", r.State)
	}
}

// procParent is the parent pid of process pid.
func procParent(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces; it ends at the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[1]
}

// procOwner is the real uid of process pid.
func procOwner(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid in /proc/%s/status", pid)
	return ""
}
