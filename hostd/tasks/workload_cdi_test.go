package tasks_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestContainerGetsExactlyItsAllocationsGPUs runs two tenants' workloads
// on one sim host with real rootless podman, A with three of the node's
// GPUs and B with one: each container's runtime config (podman inspect's
// OCIConfigPath) and its mounts as the kernel shows them name exactly
// its allocation's device nodes (and the driver's control nodes), the
// other's absent; releasing A removes A's CDI spec and leaves B's.
func TestContainerGetsExactlyItsAllocationsGPUs(t *testing.T) {
	h, env := podmanHost(t)
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	// The node's GPUs in PCI order: the driver numbers their nodes so.
	var pcis []string
	for _, g := range h.Profile.GPUs {
		pcis = append(pcis, g.PCI)
	}
	slices.Sort(pcis)
	if len(pcis) < 6 {
		t.Fatalf("profile has %d GPUs; want at least 6", len(pcis))
	}
	pid := strconv.Itoa(os.Getpid())
	allocA, allocB := "a-gpa"+pid, "a-gpb"+pid
	a := provisionTenant(t, env, allocA)
	provisionTenant(t, env, allocB)
	cases := []struct {
		alloc, id string
		gpus      []string
		want      []string // device nodes in the container
	}{
		{allocA, "w-gpa" + pid, []string{pcis[0], strings.ToUpper(pcis[2]), pcis[3]},
			[]string{"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidia2", "/dev/nvidia3", "/dev/nvidiactl"}},
		{allocB, "w-gpb" + pid, []string{pcis[5]},
			[]string{"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia5", "/dev/nvidiactl"}},
	}
	for _, c := range cases {
		out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: c.id, AllocationID: c.alloc,
			PosixUser: api.PosixUser(c.alloc), Image: ref, GPUs: c.gpus, Command: []string{workloadtest.App, "serve"}})
		r := wlReport(t, out, err)
		if r.State != api.ContainerRunning {
			t.Fatalf("%s: state %s; want running (%+v)", c.id, r.State, r)
		}
		if len(r.Devices) != len(c.gpus) {
			t.Errorf("%s: reported devices %v; want %d", c.id, r.Devices, len(c.gpus))
		}
	}
	for _, c := range cases {
		cfgPath := strings.TrimSpace(asTenant(t, env, c.alloc, "container", "inspect", "--format", "{{.OCIConfigPath}}", workload.ContainerName(c.id)))
		if got := ociGPUNodes(t, cfgPath); !slices.Equal(got, c.want) {
			t.Errorf("%s: runtime config's GPU nodes %v; want %v", c.id, got, c.want)
		}
		pidOut := strings.TrimSpace(asTenant(t, env, c.alloc, "container", "inspect", "--format", "{{.State.Pid}}", workload.ContainerName(c.id)))
		got, sources := mountedGPUNodes(t, pidOut)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: GPU nodes mounted in the container %v; want %v", c.id, got, c.want)
		}
		// Each /dev/nvidiaN is the host's node N (the one the sim tree's
		// dev/nvidiaN names), not another GPU's.
		for dst, src := range sources {
			node, err := filepath.EvalSymlinks(filepath.Join(h.StateDir, "sim", "tree", dst))
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Base(filepath.Dir(node)) + "/" + filepath.Base(node); !strings.HasSuffix(src, "/"+want) {
				t.Errorf("%s: %s is mounted from %s; want %s", c.id, dst, src, node)
			}
		}
	}
	if _, err := os.Stat(workload.CDISpecPath(workload.CDIDir, allocA)); err != nil {
		t.Fatalf("A's CDI spec: %v", err)
	}
	if _, _, err := run(t, env, api.TaskDeprovisionUser, hostproto.UserDeprovisionParams{AllocationID: allocA, PosixUser: a.name}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(workload.CDISpecPath(workload.CDIDir, allocA)); !os.IsNotExist(err) {
		t.Errorf("A's CDI spec after its release: %v; want gone", err)
	}
	if _, err := os.Stat(workload.CDISpecPath(workload.CDIDir, allocB)); err != nil {
		t.Errorf("B's CDI spec after A's release: %v; want kept", err)
	}
	if r := wlStatus(t, env, allocB, cases[1].id); r.State != api.ContainerRunning {
		t.Errorf("B's workload after A's release: %s; want running", r.State)
	}
}

// TestWorkloadStartRefusesAGPUNotOnTheNode: a GPU the node's driver does
// not have fails the start, and no container or spec is left.
func TestWorkloadStartRefusesAGPUNotOnTheNode(t *testing.T) {
	_, env := podmanHost(t)
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	alloc := "a-gpx" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	id := "w-gpx" + strconv.Itoa(os.Getpid())
	_, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: alloc,
		PosixUser: api.PosixUser(alloc), Image: ref, GPUs: []string{"0000:ee:00.0"}})
	if err == nil || !strings.Contains(err.Error(), "0000:ee:00.0") {
		t.Fatalf("start with a GPU not on the node: %v; want refused naming it", err)
	}
	if r := wlStatus(t, env, alloc, id); r.State != api.ContainerMissing {
		t.Errorf("container after the refusal: %s; want missing", r.State)
	}
	if _, err := os.Stat(workload.CDISpecPath(workload.CDIDir, alloc)); !os.IsNotExist(err) {
		t.Errorf("CDI spec after the refusal: %v; want none", err)
	}
}

// ociGPUNodes are the /dev/nvidia* a runtime config gives the container,
// as device nodes or bind mounts, sorted.
func ociGPUNodes(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Mounts []struct {
			Destination string `json:"destination"`
		} `json:"mounts"`
		Linux struct {
			Devices []struct {
				Path string `json:"path"`
			} `json:"devices"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range cfg.Mounts {
		if strings.HasPrefix(m.Destination, "/dev/nvidia") {
			out = append(out, m.Destination)
		}
	}
	for _, d := range cfg.Linux.Devices {
		if strings.HasPrefix(d.Path, "/dev/nvidia") {
			out = append(out, d.Path)
		}
	}
	slices.Sort(out)
	return out
}

// mountedGPUNodes are the /dev/nvidia* mounted in the mount namespace of
// process pid (the container's), sorted, and each one's source path.
func mountedGPUNodes(t *testing.T, pid string) ([]string, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", pid, "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	src := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[4], "/dev/nvidia") {
			continue
		}
		out = append(out, f[4])
		src[f[4]] = f[3]
	}
	slices.Sort(out)
	if len(out) != len(src) {
		t.Errorf("a node mounted twice: %v", out)
	}
	return out, src
}

// TestGPUsReachATenantWhoseTmpIsPrivate: a sim host whose state directory
// is below /tmp (as `gpuaas dev`'s data directory often is) still gives a
// container its GPUs. A tenant's sessions have a private /tmp, so its
// rootless podman cannot reach a node kept in the sim's tree there; the
// sim keeps its nodes in /run (regression: TestAppsInDev failed with
// "stat …/sim/tree/dev/nvidia-uvm: no such file or directory").
func TestGPUsReachATenantWhoseTmpIsPrivate(t *testing.T) {
	podmanHost(t) // skips where workloads cannot run
	parent, err := os.MkdirTemp("/tmp", "gpuaas-tasks-wltmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := sim.NewHostWith(filepath.Join(parent, "state"), sim.H100Baremetal8(), "sim-wltmp", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	env := h.Env("n-test", testutil.Logger(t))
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	pid := strconv.Itoa(os.Getpid())
	alloc, id := "a-gpt"+pid, "w-gpt"+pid
	provisionTenant(t, env, alloc)
	out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: alloc,
		PosixUser: api.PosixUser(alloc), Image: ref, Command: []string{workloadtest.App, "serve"}})
	r := wlReport(t, out, err)
	if r.State != api.ContainerRunning || len(r.Devices) != len(h.Profile.GPUs) {
		t.Fatalf("state %s, devices %v; want running with the node's %d GPUs", r.State, r.Devices, len(h.Profile.GPUs))
	}
	pidOut := strings.TrimSpace(asTenant(t, env, alloc, "container", "inspect", "--format", "{{.State.Pid}}", workload.ContainerName(id)))
	if got, _ := mountedGPUNodes(t, pidOut); !slices.Contains(got, "/dev/nvidia7") || !slices.Contains(got, "/dev/nvidiactl") {
		t.Errorf("GPU nodes in the container: %v; want the node's eight and nvidiactl", got)
	}
}
