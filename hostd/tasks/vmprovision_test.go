package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

func provisionParams(h *sim.Host, alloc string, slots []api.Slot, keys ...string) hostproto.VMProvisionParams {
	return hostproto.VMProvisionParams{AllocationID: alloc, UserID: "u-test", PosixUser: api.PosixUser(alloc), Slots: slots,
		VCPUs: 16 * len(slots), MemoryMiB: 4096, Image: api.VMImage{Name: sim.DefaultImageName, SHA256: h.ImageSHA256},
		SSHKeys: keys}
}

// leftovers names what a provisioning of alloc left on the host.
func leftovers(t *testing.T, h *sim.Host, alloc string) []string {
	t.Helper()
	var out []string
	p := tasks.PathsFor(h.StateDir, alloc)
	for what, path := range map[string]string{"lease": p.Lease, "seed dir": p.SeedDir, "vm key": p.VMKey,
		"vm key .pub": p.VMKeyPub, "overlay": p.Overlay} {
		if exists(path) {
			out = append(out, what)
		}
	}
	if st, _ := h.Hypervisor.State(context.Background(), alloc); st != host.DomainNotFound {
		out = append(out, "domain ("+string(st)+")")
	}
	slices.Sort(out)
	return out
}

// guestRun runs cmd in the VM over SSH as user with key.
func guestRun(t *testing.T, addr, user string, key gossh.Signer, cmd string) (string, error) {
	t.Helper()
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: user, Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second})
	if err != nil {
		return "", err
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	out, err := s.Output(cmd)
	return string(out), err
}

func vmKey(t *testing.T, h *sim.Host, alloc string) gossh.Signer {
	t.Helper()
	b, err := os.ReadFile(tasks.PathsFor(h.StateDir, alloc).VMKey)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVMProvision(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	all := slots(t, env)
	renter, renterLine := userKey(t)
	const alloc = "a-prov00000001"
	p := provisionParams(h, alloc, all[:2], renterLine)
	res, rec, err := run(t, env, api.TaskVMProvision, p)
	if err != nil {
		t.Fatal(err)
	}
	r := res.(hostproto.VMProvisionResult)
	if r.Domain != alloc || r.Address == "" {
		t.Errorf("result = %+v", r)
	}
	if got := rec.phases(api.PhaseDone); !slices.Equal(got, tasks.ProvisionPhases) {
		t.Errorf("done phases = %v; want %v", got, tasks.ProvisionPhases)
	}
	if got := rec.phases(api.PhaseCleanup); len(got) != 0 {
		t.Errorf("cleanup phases = %v; want none", got)
	}

	// Both the renter and hostd, with the per-VM key, get in.
	user := api.PosixUser(alloc)
	for who, key := range map[string]gossh.Signer{"renter": renter, "hostd": vmKey(t, h, alloc)} {
		if out, err := guestRun(t, r.Address, user, key, "echo hello"); err != nil || out != "hello\n" {
			t.Errorf("%s in the VM: %q, %v", who, out, err)
		}
	}
	paths := tasks.PathsFor(h.StateDir, alloc)
	if fi, err := os.Stat(paths.VMKey); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("vm key: %v, %v; want mode 0600", fi.Mode(), err)
	}

	spec, err := h.Hypervisor.Spec(alloc)
	if err != nil {
		t.Fatal(err)
	}
	want := host.DomainSpec{
		Name: alloc, VCPUs: 32, MemoryMiB: 4096, NUMANode: 0, CPUSet: "0-55,112-167",
		HostDevs: []host.PCIAddress{host.PCIAddress(all[0].GPUPCI), host.PCIAddress(all[1].GPUPCI),
			host.PCIAddress(all[0].FabricVF), host.PCIAddress(all[1].FabricVF)},
		Disks: []host.Disk{{Source: paths.Overlay, Target: "vda"}, {Source: all[0].NVMe, Target: "vdb", Raw: true},
			{Source: all[1].NVMe, Target: "vdc", Raw: true}},
		SeedISO: paths.SeedISO, MAC: all[0].MAC, Network: "default",
	}
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("domain spec:\ngot  %+v\nwant %+v", spec, want)
	}

	var l struct {
		AllocationID string   `json:"allocation_id"`
		GPUs         []string `json:"gpus"`
		NVMe         []string `json:"nvme"`
		FabricVFs    []string `json:"fabric_vfs"`
	}
	b, _ := os.ReadFile(paths.Lease)
	if err := json.Unmarshal(b, &l); err != nil || l.AllocationID != alloc || len(l.GPUs) != 2 || len(l.NVMe) != 2 || len(l.FabricVFs) != 2 {
		t.Errorf("lease = %s (%v)", b, err)
	}

	ud, _ := os.ReadFile(filepath.Join(paths.SeedDir, "user-data"))
	if !bytes.HasPrefix(ud, []byte("#cloud-config\n")) || !bytes.Contains(ud, []byte("name: "+user)) ||
		!bytes.Contains(ud, []byte("renter@laptop")) || !bytes.Contains(ud, []byte("gpuaas-hostd@"+alloc)) {
		t.Errorf("user-data:\n%s", ud)
	}
	md, _ := os.ReadFile(filepath.Join(paths.SeedDir, "meta-data"))
	if !bytes.Contains(md, []byte("instance-id: "+alloc)) || !bytes.Contains(md, []byte("local-hostname: "+alloc)) {
		t.Errorf("meta-data:\n%s", md)
	}
	nc, _ := os.ReadFile(filepath.Join(paths.SeedDir, "network-config"))
	for _, s := range []string{"version: 2", "macaddress: " + all[0].MAC, all[0].IP + "/16", "via: 10.77.0.1"} {
		if !bytes.Contains(nc, []byte(s)) {
			t.Errorf("network-config lacks %q:\n%s", s, nc)
		}
	}
	var cmds []string
	for _, c := range h.Runner.Calls() {
		cmds = append(cmds, strings.Join(c, " "))
	}
	base, _ := filepath.Abs(filepath.Join(h.ImageDir, sim.DefaultImageName+".img"))
	in := func(n string) string { return filepath.Join(paths.SeedDir, n) }
	wantCmds := []string{
		"cloud-localds " + paths.SeedISO + " " + in("user-data") + " " + in("meta-data") + " --network-config " + in("network-config"),
		"qemu-img create -f qcow2 -F qcow2 -b " + base + " " + paths.Overlay,
	}
	if !slices.Equal(cmds, wantCmds) {
		t.Errorf("commands:\ngot  %q\nwant %q", cmds, wantCmds)
	}
}

// Slots on two NUMA nodes: the VM is not pinned.
func TestVMProvisionAcrossNUMA(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	all := slots(t, env)
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-numa", all[3:5])); err != nil {
		t.Fatal(err)
	}
	spec, _ := h.Hypervisor.Spec("a-numa")
	if spec.NUMANode != -1 || spec.CPUSet != "" {
		t.Errorf("NUMA node %d, cpuset %q; want -1 and none", spec.NUMANode, spec.CPUSet)
	}
}

// Whichever phase fails, nothing of the provisioning is left.
func TestVMProvisionFailureCleansUp(t *testing.T) {
	t.Parallel()
	type breaker func(t *testing.T, h *sim.Host, env *tasks.Env, s []api.Slot)
	fail := func(phase string) breaker {
		return func(_ *testing.T, h *sim.Host, _ *tasks.Env, _ []api.Slot) { h.Faults.Fail(phase, "") }
	}
	tests := []struct {
		name      string
		breakHost breaker
		wantPhase string
		wantErr   error
	}{
		{"gpu check fails", func(_ *testing.T, h *sim.Host, _ *tasks.Env, s []api.Slot) {
			h.FailGPUCheck(s[1].GPUPCI, "does not answer")
		}, tasks.PhaseGPUCheck, tasks.ErrGPUCheck},
		{"injected in lease", fail(tasks.PhaseLease), tasks.PhaseLease, tasks.ErrInjected},
		{"injected in vfio_bind_check", fail(tasks.PhaseVFIOCheck), tasks.PhaseVFIOCheck, tasks.ErrInjected},
		{"injected in image_verify", fail(tasks.PhaseImageVerify), tasks.PhaseImageVerify, tasks.ErrInjected},
		{"injected in seed", fail(tasks.PhaseSeed), tasks.PhaseSeed, tasks.ErrInjected},
		{"injected in define_start", fail(tasks.PhaseDefineStart), tasks.PhaseDefineStart, tasks.ErrInjected},
		{"injected in readiness", fail(tasks.PhaseReadiness), tasks.PhaseReadiness, tasks.ErrInjected},
		{"cloud-localds fails after the key is made", func(_ *testing.T, h *sim.Host, _ *tasks.Env, _ []api.Slot) {
			h.Runner.FailCommand("cloud-localds", "genisoimage: No space left on device")
		}, tasks.PhaseSeed, nil},
		{"qemu-img fails", func(_ *testing.T, h *sim.Host, _ *tasks.Env, _ []api.Slot) {
			h.Runner.FailCommand("qemu-img", "Could not create image: No space left on device")
		}, tasks.PhaseDefineStart, nil},
		{"start fails after define", func(t *testing.T, h *sim.Host, _ *tasks.Env, s []api.Slot) {
			// A domain hostd does not know of holds the GPU.
			ctx := context.Background()
			spec := host.DomainSpec{Name: "squatter", VCPUs: 1, MemoryMiB: 1, NUMANode: -1, HostDevs: []host.PCIAddress{host.PCIAddress(s[0].GPUPCI)}}
			if err := h.Hypervisor.Define(ctx, spec); err != nil {
				t.Fatal(err)
			}
			if err := h.Hypervisor.Start(ctx, "squatter"); err != nil {
				t.Fatal(err)
			}
		}, tasks.PhaseDefineStart, host.ErrDeviceBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, env := simHost(t, sim.H200Slice8())
			s := slots(t, env)
			tt.breakHost(t, h, env, s)
			_, userLine := userKey(t)
			const alloc = "a-fail"
			_, rec, err := run(t, env, api.TaskVMProvision, provisionParams(h, alloc, s[:2], userLine))
			pe := wantPhaseError(t, err, tt.wantPhase)
			if tt.wantErr != nil && !errors.Is(pe, tt.wantErr) {
				t.Errorf("error %v; want %v", pe, tt.wantErr)
			}
			if got := leftovers(t, h, alloc); len(got) != 0 {
				t.Errorf("left behind: %v", got)
			}
			names, _ := h.Hypervisor.List(context.Background())
			if slices.Contains(names, alloc) {
				t.Errorf("domains = %v", names)
			}
			// Everything done before the failure is undone, newest first.
			i := slices.Index(tasks.ProvisionPhases, tt.wantPhase)
			var want []string
			for _, ph := range slices.Backward(tasks.ProvisionPhases[:i+1]) {
				if ph == tasks.PhaseLease || ph == tasks.PhaseSeed || ph == tasks.PhaseDefineStart {
					want = append(want, ph)
				}
			}
			if got := rec.phases(api.PhaseCleanup); !slices.Equal(got, want) {
				t.Errorf("cleanup phases = %v; want %v", got, want)
			}
			if got := rec.phases(api.PhaseFailed); !slices.Equal(got, []string{tt.wantPhase}) {
				t.Errorf("failed phases = %v", got)
			}
		})
	}
}

func TestVMProvisionLeaseConflict(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-first", s[0:2])); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-second", s[1:3]))
	pe := wantPhaseError(t, err, tasks.PhaseLease)
	if !errors.Is(pe, tasks.ErrDeviceLeased) || !strings.Contains(pe.Error(), s[1].GPUPCI) || !strings.Contains(pe.Error(), "a-first") {
		t.Errorf("error %v; want ErrDeviceLeased naming %s and a-first", pe, s[1].GPUPCI)
	}
	if got := leftovers(t, h, "a-second"); len(got) != 0 {
		t.Errorf("a-second left %v", got)
	}
	if got := leftovers(t, h, "a-first"); len(got) != 6 {
		t.Errorf("a-first has %v; want all of it kept", got)
	}

	// Once the first is released, the second gets its slots.
	if _, _, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: "a-first", Slots: s[0:2]}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-second", s[1:3])); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestVMProvisionImage(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	tests := []struct {
		name    string
		image   api.VMImage
		wantErr error
		wantMsg string
	}{
		{"checksum mismatch", api.VMImage{Name: sim.DefaultImageName, SHA256: strings.Repeat("ab", 32)}, tasks.ErrImageChecksum, "has sha256 " + h.ImageSHA256},
		{"no checksum", api.VMImage{Name: sim.DefaultImageName}, tasks.ErrImageChecksum, "no valid sha256"},
		{"missing", api.VMImage{Name: "debian-13", SHA256: h.ImageSHA256}, tasks.ErrImageMissing, "debian-13.img does not exist"},
	}
	for _, tt := range tests {
		p := provisionParams(h, "a-image", s[:1])
		p.Image = tt.image
		_, _, err := run(t, env, api.TaskVMProvision, p)
		pe := wantPhaseError(t, err, tasks.PhaseImageVerify)
		if !errors.Is(pe, tt.wantErr) || !strings.Contains(pe.Error(), tt.wantMsg) {
			t.Errorf("%s: got %v; want %v containing %q", tt.name, pe, tt.wantErr, tt.wantMsg)
		}
		if got := leftovers(t, h, "a-image"); len(got) != 0 {
			t.Errorf("%s: left %v", tt.name, got)
		}
	}
}

// rebindTo points a PCI device's driver link at another driver in the
// sim host's sysfs tree.
func rebindTo(t *testing.T, h *sim.Host, pci, driver string) {
	t.Helper()
	link := filepath.Join(h.StateDir, "sim", "tree", "sys", "bus", "pci", "devices", pci, "driver")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if driver != "" {
		if err := os.Symlink("../../../../bus/pci/drivers/"+driver, link); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVMProvisionNotVFIOBound(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	rebindTo(t, h, s[1].GPUPCI, "nvidia")
	rebindTo(t, h, s[0].FabricVF, "")
	_, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-vfio", s[:2]))
	pe := wantPhaseError(t, err, tasks.PhaseVFIOCheck)
	msg := pe.Error()
	if !errors.Is(pe, tasks.ErrNotVFIOBound) || !strings.Contains(msg, s[1].GPUPCI+" (nvidia)") || !strings.Contains(msg, s[0].FabricVF+" (no driver)") {
		t.Errorf("got %v; want ErrNotVFIOBound naming both devices", pe)
	}
	if got := leftovers(t, h, "a-vfio"); len(got) != 0 {
		t.Errorf("left %v", got)
	}
}

func TestVMProvisionInvalidParams(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	tests := []struct {
		name   string
		change func(*hostproto.VMProvisionParams)
	}{
		{"path in allocation id", func(p *hostproto.VMProvisionParams) { p.AllocationID = "../etc" }},
		{"bad user", func(p *hostproto.VMProvisionParams) { p.PosixUser = "-root" }},
		{"no slots", func(p *hostproto.VMProvisionParams) { p.Slots = nil }},
		{"bad PCI address", func(p *hostproto.VMProvisionParams) {
			p.Slots = []api.Slot{{GPUPCI: "../../x", MAC: s[0].MAC, IP: s[0].IP}}
		}},
		{"NVMe outside /dev", func(p *hostproto.VMProvisionParams) {
			p.Slots = []api.Slot{{GPUPCI: s[0].GPUPCI, NVMe: "/etc/shadow", MAC: s[0].MAC, IP: s[0].IP}}
		}},
		{"no MAC", func(p *hostproto.VMProvisionParams) { p.Slots = []api.Slot{{GPUPCI: s[0].GPUPCI, IP: s[0].IP}} }},
		{"image path", func(p *hostproto.VMProvisionParams) { p.Image.Name = "../../etc/passwd" }},
		{"key with options", func(p *hostproto.VMProvisionParams) { p.SSHKeys = []string{"not a key"} }},
		{"no vCPUs", func(p *hostproto.VMProvisionParams) { p.VCPUs = 0 }},
		{"GPU UUID that is not one", func(p *hostproto.VMProvisionParams) { p.Slots[0].GPUUUID = "GPU-x\ngpuaas-driver-check: fail" }},
	}
	for _, tt := range tests {
		p := provisionParams(h, "a-bad", s[:1])
		tt.change(&p)
		_, rec, err := run(t, env, api.TaskVMProvision, p)
		if !errors.Is(err, tasks.ErrInvalidParams) {
			t.Errorf("%s: got %v; want ErrInvalidParams", tt.name, err)
		}
		if got := rec.phases(api.PhaseStarted); len(got) != 0 {
			t.Errorf("%s: phases %v ran", tt.name, got)
		}
	}
}

// hostd killed after provisioning: the reopened host has the VM running,
// and a repeated provisioning (an interrupted task resent) replaces it.
func TestVMProvisionAfterRestart(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	h, err := sim.NewHost(state, sim.H200Slice8(), "sim-h200-1")
	if err != nil {
		t.Fatal(err)
	}
	env := h.Env("n-test", nil)
	s := slots(t, env)
	const alloc = "a-restart"
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, alloc, s[:1])); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	h2, err := sim.NewHost(state, sim.H200Slice8(), "sim-h200-1")
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	env2 := h2.Env("n-test", nil)
	addr, err := tasks.VMAddress(context.Background(), env2, alloc, s[0].IP)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := guestRun(t, addr, api.PosixUser(alloc), vmKey(t, h2, alloc), "echo back"); err != nil || out != "back\n" {
		t.Errorf("VM after restart: %q, %v", out, err)
	}
	res, _, err := run(t, env2, api.TaskVMProvision, provisionParams(h2, alloc, s[:1]))
	if err != nil {
		t.Fatalf("provisioning again: %v", err)
	}
	if names, _ := h2.Hypervisor.List(context.Background()); !slices.Equal(names, []string{alloc}) {
		t.Errorf("domains = %v", names)
	}
	if out, err := guestRun(t, res.(hostproto.VMProvisionResult).Address, api.PosixUser(alloc), vmKey(t, h2, alloc), "echo again"); err != nil || out != "again\n" {
		t.Errorf("VM after reprovisioning: %q, %v", out, err)
	}
}

// TestVMProvisionGPUCheckNamesTheFailedGPUs: the pre-handout check fails
// with every faulty GPU of the request (and only those), before anything
// else is done.
func TestVMProvisionGPUCheckNamesTheFailedGPUs(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	h.FailGPUCheck(s[0].GPUPCI, "")
	h.FailGPUCheck(s[2].GPUPCI, "xid 79")
	h.FailGPUCheck(s[5].GPUPCI, "not in this request")
	_, userLine := userKey(t)
	_, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-check", s[:3], userLine))
	var ge *tasks.GPUCheckError
	if !errors.As(err, &ge) || !slices.Equal(ge.GPUs, []string{s[0].GPUPCI, s[2].GPUPCI}) {
		t.Fatalf("got %v; want a GPU check error naming %s and %s", err, s[0].GPUPCI, s[2].GPUPCI)
	}
	h.PassGPUCheck(s[0].GPUPCI)
	h.PassGPUCheck(s[2].GPUPCI)
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-check", s[:3], userLine)); err != nil {
		t.Fatalf("after the GPUs pass: %v", err)
	}
}
