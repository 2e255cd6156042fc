package guestimage

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/workload"
)

// TestGuestCDIWritesHostdsSpec: the guest's boot script writes, from the
// driver's records and nodes under a root, the spec hostd writes for the
// same GPUs on a node (workload.GPUSpec) — the devices hostd then names in
// the guest (workload.Podman.GuestGPUs); no GPU on the driver: no spec.
func TestGuestCDIWritesHostdsSpec(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	script := filepath.Join(t.TempDir(), "gpuaas-guest-cdi")
	if err := os.WriteFile(script, []byte(guestCDIScript), 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	mk := func(path, content string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Two GPUs (minors 1 and 0, in PCI order 0 then 1), nvidiactl, no
	// nvidia-uvm.
	var gpus []workload.GPUDevice
	for i, pci := range []string{"0000:06:00.0", "0000:07:00.0"} {
		mk(fmt.Sprintf("proc/driver/nvidia/gpus/%s/information", pci), fmt.Sprintf("Model: \t NVIDIA H200\nGPU UUID: \t GPU-%d\nDevice Minor: \t %d\n", i, i))
		mk(fmt.Sprintf("dev/nvidia%d", i), "")
		gpus = append(gpus, workload.GPUDevice{PCI: pci, Minor: i})
	}
	mk("dev/nvidiactl", "")
	if out, err := exec.Command(script, root, "a-guest1").CombinedOutput(); err != nil {
		t.Fatalf("gpuaas-guest-cdi: %v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(root, "var/run/cdi/gpuaas-a-guest1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got workload.CDISpec
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want, _, err := workload.GPUSpec(root, "a-guest1", gpus)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("guest's spec\n%+v\nwant hostd's\n%+v", got, want)
	}
	// The driver without GPUs: the spec goes.
	if err := os.RemoveAll(filepath.Join(root, "proc")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(script, root, "a-guest1").CombinedOutput(); err != nil {
		t.Fatalf("gpuaas-guest-cdi: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "var/run/cdi/gpuaas-a-guest1.json")); !os.IsNotExist(err) {
		t.Errorf("spec of a guest without GPUs: %v; want none", err)
	}
	if out, err := exec.Command(script, root, "../etc").CombinedOutput(); err == nil {
		t.Errorf("a bad name was taken: %s", out)
	}
}
