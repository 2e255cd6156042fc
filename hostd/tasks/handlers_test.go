package tasks_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// event is one progress report.
type event struct{ phase, status, message string }

// recorder is a Reporter that keeps every report.
type recorder struct {
	// mu protects events.
	mu     sync.Mutex
	events []event
}

func (r *recorder) Progress(phase, status string, _ time.Duration, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{phase, status, message})
}

// phases lists the phases reported with status, in order.
func (r *recorder) phases(status string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.status == status {
			out = append(out, e.phase)
		}
	}
	return out
}

// testRegistry polls fast and gives up on readiness soon.
var testRegistry = tasks.New(tasks.Config{ReadinessTimeout: 10 * time.Second, PollInterval: 10 * time.Millisecond})

// simHost is a sim host under a fresh state directory.
func simHost(t *testing.T, p sim.Profile) (*sim.Host, *tasks.Env) {
	t.Helper()
	h, err := sim.NewHost(t.TempDir(), p, p.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, h.Env("n-test", testutil.Logger(t))
}

// run runs one task through the registry, as the agent does.
func run(t *testing.T, env *tasks.Env, taskType string, params any) (any, *recorder, error) {
	t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := testRegistry[taskType]
	if !ok {
		t.Fatalf("no handler for %s", taskType)
	}
	rec := &recorder{}
	res, err := h(context.Background(), env, raw, rec)
	return res, rec, err
}

// slots discovers the host's slots as controld would register them.
func slots(t *testing.T, env *tasks.Env) []api.Slot {
	t.Helper()
	res, _, err := run(t, env, api.TaskTopologyDiscover, hostproto.TopologyDiscoverParams{Shape: api.ShapeGPUSlice})
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Slot
	for _, c := range res.(api.TopologyResult).CandidateSlots {
		out = append(out, api.Slot{ID: "sl-" + c.GPUPCI, Index: c.Index, GPUPCI: c.GPUPCI, NVMe: c.NVMe,
			FabricVF: c.FabricVF, NUMANode: c.NUMANode, MAC: c.MAC, IP: c.IP})
	}
	return out
}

// userKey is a renter's SSH key.
func userKey(t *testing.T) (gossh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(s.PublicKey()))) + " renter@laptop"
}

func wantPhaseError(t *testing.T, err error, phase string) *tasks.PhaseError {
	t.Helper()
	var pe *tasks.PhaseError
	if !errors.As(err, &pe) || pe.Phase != phase {
		t.Fatalf("got %v; want a PhaseError in %s", err, phase)
	}
	return pe
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestDefault(t *testing.T) {
	want := []string{api.TaskHealthProbe, api.TaskTopologyDiscover, api.TaskVMProvision, api.TaskVMRelease,
		api.TaskProvisionUser, api.TaskDeprovisionUser,
		api.TaskJobStart, api.TaskJobWait, api.TaskJobStop,
		api.TaskVolumeCreate, api.TaskVolumeResize, api.TaskVolumeDelete, api.TaskVolumeAttach, api.TaskVolumeDetach,
		api.TaskWorkloadStart, api.TaskWorkloadStop, api.TaskWorkloadStatus}
	got := slices.Sorted(maps.Keys(tasks.Default()))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Default() handles %v; want %v", got, want)
	}
}

func TestHealthProbe(t *testing.T) {
	t.Parallel()
	_, env := simHost(t, sim.H200Slice8())
	res, rec, err := run(t, env, api.TaskHealthProbe, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := res.(tasks.HealthReport)
	if r.Kernel != "6.8.0-51-generic" || r.MemoryMiB == 0 || r.MemoryAvailableMiB == 0 || !r.KVM || r.IOMMUGroups == 0 {
		t.Errorf("kernel %q, memory %d/%d MiB, kvm %v, %d IOMMU groups", r.Kernel, r.MemoryAvailableMiB, r.MemoryMiB, r.KVM, r.IOMMUGroups)
	}
	if !r.VFIO.Device || !r.VFIO.Modules["vfio_pci"] || !r.VFIO.Modules["vfio_iommu_type1"] {
		t.Errorf("vfio = %+v", r.VFIO)
	}
	if r.GPUs.Count != 8 || r.GPUs.Models["H200"] != 8 || r.GPUs.Drivers["vfio-pci"] != 8 {
		t.Errorf("gpus = %+v; want 8 H200 on vfio-pci", r.GPUs)
	}
	if r.Fabric.VFs != 8 || len(r.Fabric.PFs) != 2 || r.Fabric.PFs[0].VFs != 4 || r.Fabric.PFs[0].Link != "unknown" {
		t.Errorf("fabric = %+v; want 8 VFs on 2 PFs", r.Fabric)
	}
	if len(r.Problems) != 0 {
		t.Errorf("problems = %v", r.Problems)
	}
	if got := rec.phases(api.PhaseDone); !slices.Equal(got, []string{tasks.PhaseProbe}) {
		t.Errorf("done phases = %v", got)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Error(err)
	}

	_, bm := simHost(t, with(sim.H100Baremetal8(), func(p *sim.Profile) { p.GPUs = nil }))
	res, _, err = run(t, bm, api.TaskHealthProbe, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(tasks.HealthReport); r.GPUs.Count != 0 || len(r.Problems) != 1 || r.KVM != true {
		t.Errorf("GPU-less host: %+v; want one problem", r)
	}
}

func TestTopologyDiscover(t *testing.T) {
	t.Parallel()
	p := sim.H200Slice8()
	_, env := simHost(t, p)
	got := slots(t, env)
	want := p.Slots()
	if len(got) != len(want) {
		t.Fatalf("got %d slots; want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].GPUPCI != want[i].GPUPCI || got[i].NVMe != want[i].NVMe || got[i].FabricVF != want[i].FabricVF {
			t.Errorf("slot %d = %+v; want %+v", i, got[i], want[i])
		}
	}
	res, _, err := run(t, env, api.TaskTopologyDiscover, hostproto.TopologyDiscoverParams{Shape: api.ShapeGPUSlice, Subnet: "172.20.0.0/20"})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(api.TopologyResult); r.HostName != p.Name || r.CandidateSlots[0].IP != "172.20.1.10" {
		t.Errorf("host %q, slot 0 IP %s; want %s, 172.20.1.10", r.HostName, r.CandidateSlots[0].IP, p.Name)
	}
	if _, _, err := run(t, env, api.TaskTopologyDiscover, hostproto.TopologyDiscoverParams{Shape: api.ShapeGPUSlice, Subnet: "nope"}); !errors.Is(err, tasks.ErrInvalidParams) {
		t.Errorf("bad subnet: got %v; want ErrInvalidParams", err)
	}
	_, _, err = run(t, env, api.TaskTopologyDiscover, hostproto.TopologyDiscoverParams{Shape: "vm"})
	wantPhaseError(t, err, tasks.PhaseDiscover)
}

func with(p sim.Profile, change func(*sim.Profile)) sim.Profile {
	c := p.Clone()
	change(&c)
	return c
}
