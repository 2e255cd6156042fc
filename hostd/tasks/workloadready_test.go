package tasks_test

import (
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestWorkloadReadinessWithRealPodman probes real rootless containers
// through the allocation's environment (docs/apps.md, "Readiness"): an
// HTTP app that listens after a second is reported ready by its HTTP
// probe and by a TCP probe; a path it answers 404 is not ready, the
// probe's error saying so; an app that never listens is not ready when
// the wait is over, with the probe's error and its last log lines, its
// container still running (controld keeps the deadline and stops it).
func TestWorkloadReadinessWithRealPodman(t *testing.T) {
	_, env := podmanHost(t)
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	pid := strconv.Itoa(os.Getpid())
	alloc := "a-rdy" + pid
	provisionTenant(t, env, alloc)
	user := api.PosixUser(alloc)
	start := func(id string, cmd ...string) {
		t.Helper()
		out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: alloc,
			PosixUser: user, Image: ref, Command: append([]string{workloadtest.App}, cmd...)})
		if r := wlReport(t, out, err); r.State != api.ContainerRunning {
			t.Fatalf("%s: state %s; want running", id, r.State)
		}
	}
	probe := func(id string, p api.WorkloadProbe, wait time.Duration) hostproto.WorkloadReport {
		t.Helper()
		out, _, err := run(t, env, api.TaskWorkloadStatus, hostproto.WorkloadStatusParams{WorkloadID: id, AllocationID: alloc,
			PosixUser: user, Wait: wait, Probe: &p})
		return wlReport(t, out, err)
	}

	port := freePort(t)
	web := "w-rdyweb" + pid
	start(web, "http", strconv.Itoa(port), "1s")
	// Not listening yet when the wait begins; ready within it.
	if r := probe(web, api.WorkloadProbe{Port: port, HTTPPath: "/ready"}, time.Minute); !r.Ready || r.ProbeError != "" ||
		r.State != api.ContainerRunning {
		t.Fatalf("http probe of a listening app: %+v; want ready", r)
	}
	if r := probe(web, api.WorkloadProbe{Port: port}, time.Minute); !r.Ready {
		t.Errorf("tcp probe of a listening app: %+v; want ready", r)
	}
	r := probe(web, api.WorkloadProbe{Port: port, HTTPPath: "/nope"}, 2*time.Second)
	if r.Ready || !strings.Contains(r.ProbeError, "GET /nope on port "+strconv.Itoa(port)+": 404 Not Found") {
		t.Errorf("http probe of a path answering 404: ready %v, error %q; want not ready, saying 404", r.Ready, r.ProbeError)
	}

	silent := "w-rdysil" + pid
	start(silent, "serve")
	quiet := freePort(t)
	r = probe(silent, api.WorkloadProbe{Port: quiet, HTTPPath: "/ready"}, 3*time.Second)
	if r.Ready || r.State != api.ContainerRunning || !strings.Contains(r.ProbeError, "connection refused") ||
		!strings.Contains(r.ProbeError, "port "+strconv.Itoa(quiet)) {
		t.Errorf("probe of an app that never listens: %+v; want running, not ready, connection refused on port %d", r, quiet)
	}
	if !slices.ContainsFunc(r.LastLines, func(l string) bool { return strings.Contains(l, "serving as uid") }) {
		t.Errorf("last lines %q; want the app's line", r.LastLines)
	}

	// A container that ends while it is probed: the wait ends with it.
	gone := "w-rdyend" + pid
	start(gone, "count", "3", "300ms")
	began := time.Now()
	r = probe(gone, api.WorkloadProbe{Port: quiet}, time.Minute)
	if r.Ready || r.State != api.ContainerExited || !strings.Contains(r.ProbeError, "tcp connect to port") {
		t.Errorf("probe of an app that exits: %+v; want exited, not ready", r)
	}
	if waited := time.Since(began); waited > 50*time.Second {
		t.Errorf("the probe waited %s for an exited container; want its end to end the wait", waited)
	}
}

// TestWorkloadWithoutGPUsAndShm: a start with no_gpus runs a container
// with no GPU device (none reported, none mounted, no CDI spec written),
// and shm_bytes sizes its /dev/shm.
func TestWorkloadWithoutGPUsAndShm(t *testing.T) {
	_, env := podmanHost(t)
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	pid := strconv.Itoa(os.Getpid())
	alloc, id := "a-nogpu"+pid, "w-nogpu"+pid
	provisionTenant(t, env, alloc)
	out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: alloc,
		PosixUser: api.PosixUser(alloc), Image: ref, NoGPUs: true, ShmBytes: 96 << 20,
		Command: []string{workloadtest.App, "serve"}})
	r := wlReport(t, out, err)
	if r.State != api.ContainerRunning || len(r.Devices) != 0 {
		t.Fatalf("state %s, devices %v; want running with none", r.State, r.Devices)
	}
	name := workload.ContainerName(id)
	pidOut := strings.TrimSpace(asTenant(t, env, alloc, "container", "inspect", "--format", "{{.State.Pid}}", name))
	if got, _ := mountedGPUNodes(t, pidOut); len(got) != 0 {
		t.Errorf("GPU nodes in a container of gpus 0: %v; want none", got)
	}
	if _, err := os.Stat(workload.CDISpecPath(workload.CDIDir, alloc)); !os.IsNotExist(err) {
		t.Errorf("CDI spec of an allocation whose only workload has no GPUs: %v; want none", err)
	}
	if shm := strings.TrimSpace(asTenant(t, env, alloc, "container", "inspect", "--format", "{{.HostConfig.ShmSize}}", name)); shm != strconv.Itoa(96<<20) {
		t.Errorf("shm size %s; want %d", shm, 96<<20)
	}
	if _, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id + "b", AllocationID: alloc,
		PosixUser: api.PosixUser(alloc), Image: ref, NoGPUs: true, GPUs: []string{"0000:18:00.0"}}); err == nil {
		t.Error("no_gpus with gpus: accepted; want refused")
	}
}
