package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/gpumon"
	"github.com/gpuaas/gpuaas/hostd/host"
)

// TestSimNvidiaSMIVFIOGPUsAnsweredByGuest: a slice host's nvidia-smi does
// not list its GPUs bound to vfio-pci (as on a real host); the guest they
// are passed through to lists them, in hostdev order, under its own bus
// ids and with the host's UUIDs, from the same load knobs. A guest told to
// fail answers with the message and exit status 9.
func TestSimNvidiaSMIVFIOGPUsAnsweredByGuest(t *testing.T) {
	ctx := context.Background()
	h, err := NewHost(t.TempDir(), H200Slice8(), "g1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if _, err := gpumon.Read(ctx, h.Runner, time.Now()); host.ExitCode(err) != 6 || !strings.Contains(err.Error(), "No devices were found") {
		t.Errorf("host nvidia-smi with every GPU on vfio-pci: got %v; want exit 6, no devices", err)
	}
	nv, err := NewHost(t.TempDir(), H200Slice8().BindGPUs("nvidia"), "g2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nv.Close() })
	onHost, err := gpumon.Read(ctx, nv.Runner, time.Now())
	if err != nil || len(onHost) != 8 {
		t.Fatalf("host nvidia-smi with GPUs on nvidia: got %d samples, %v; want 8", len(onHost), err)
	}

	first, second := h.Profile.GPUs[5].PCI, h.Profile.GPUs[2].PCI
	key, line := guestKey(t)
	spec := testSpec("a-gpu", seedDir(t, "gbob", line), host.PCIAddress(first), host.PCIAddress(h.Profile.VFs[0].PCI), host.PCIAddress(second))
	if err := h.Hypervisor.Define(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := h.Hypervisor.Start(ctx, "a-gpu"); err != nil {
		t.Fatal(err)
	}
	addr, err := h.Hypervisor.Address(ctx, "a-gpu")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetGPULoad(first, 70); err != nil {
		t.Fatal(err)
	}
	cmd := gpumon.Command + " " + strings.Join(gpumon.Args(), " ")
	out, code, err := sshRun(t, addr, "gbob", key, cmd)
	if err != nil || code != 0 {
		t.Fatalf("guest nvidia-smi: exit %d, %v: %s", code, err, out)
	}
	got, err := gpumon.Parse([]byte(out), time.Now())
	if err != nil || len(got) != 2 {
		t.Fatalf("guest nvidia-smi: got %d samples, %v; want 2:\n%s", len(got), err, out)
	}
	uuidOf := func(pci string) string {
		for _, g := range h.Runner.gpus {
			if g.pci == pci {
				return g.uuid
			}
		}
		return ""
	}
	for i, tt := range []struct {
		hostPCI string
		util    float64
	}{{first, 70}, {second, 0}} {
		g := got[i]
		if g.Index != i || g.PCI != GuestBusID(i) || g.UUID != uuidOf(tt.hostPCI) || *g.UtilizationPct != tt.util {
			t.Errorf("guest GPU %d: got index %d pci %s uuid %s util %v; want %d, %s, %s (host %s), %v",
				i, g.Index, g.PCI, g.UUID, *g.UtilizationPct, i, GuestBusID(i), uuidOf(tt.hostPCI), tt.hostPCI, tt.util)
		}
	}

	h.Hypervisor.FailGuestNvidiaSMI("a-gpu", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
	out, code, err = sshRun(t, addr, "gbob", key, cmd)
	if err != nil || code != 9 || !strings.Contains(out, "couldn't communicate") {
		t.Errorf("failing guest nvidia-smi: got exit %d, %v, %q; want 9 and the message", code, err, out)
	}
	if n := h.Hypervisor.GuestNvidiaSMICalls("a-gpu"); n != 2 {
		t.Errorf("guest nvidia-smi calls: got %d; want 2", n)
	}
	// Anything else is still run by sh.
	if out, code, err := sshRun(t, addr, "gbob", key, "echo hi"); err != nil || code != 0 || strings.TrimSpace(out) != "hi" {
		t.Errorf("echo hi: got %q, %d, %v", out, code, err)
	}
}
