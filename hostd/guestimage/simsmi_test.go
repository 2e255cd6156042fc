package guestimage

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMinimalDriverCheckWithSimulatedSMI runs the minimal guest's driver
// check with the test image's simulated nvidia-smi on PATH (both busybox
// sh, as in the guest): it lists the seed's UUIDs marked as simulated,
// and the check's marker text carries one "uuid: " line per GPU; no UUID
// in the seed is "No devices were found", fewer than the seed's count a
// count mismatch.
func TestMinimalDriverCheckWithSimulatedSMI(t *testing.T) {
	bb := hostBusybox(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "driver-check")
	if err := os.WriteFile(script, []byte(minimalDriverCheckScript), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, a := range []string{"awk", "grep", "head", "sed", "sh"} {
		if err := os.Symlink(bb, filepath.Join(bin, a)); err != nil {
			t.Fatal(err)
		}
	}
	smi := filepath.Join(bin, "nvidia-smi")
	if err := os.WriteFile(smi, []byte(strings.Replace(simNvidiaSMIScript, "#!/bin/sh", "#!"+filepath.Join(bin, "sh"), 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	const a, b = "GPU-aaaaaaaa-0000-0000-0000-000000000001", "GPU-bbbbbbbb-0000-0000-0000-000000000002"
	tests := []struct {
		name, meta string
		wantOK     bool
		want       []string
	}{
		{"two simulated GPUs", "instance-id: i\n" + MetaGPUs + ": 2\n" + MetaSimGPUUUIDs + ": " + a + " " + b + "\n", true,
			[]string{"ok: 2 GPUs (instance i)", "\n" + DriverCheckUUIDPrefix + SimUUIDPrefix + "aaaaaaaa-0000-0000-0000-000000000001\n",
				"\n" + DriverCheckUUIDPrefix + SimUUIDPrefix + "bbbbbbbb-0000-0000-0000-000000000002"}},
		{"none seeded", "instance-id: i\n" + MetaGPUs + ": 1\n", false, []string{"nvidia-smi -L exited 6: No devices were found"}},
		{"fewer than promised", "instance-id: i\n" + MetaGPUs + ": 2\n" + MetaSimGPUUUIDs + ": " + a + "\n", false, []string{"expected 2 GPUs, nvidia-smi -L lists 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			flat := filepath.Join(t.TempDir(), "meta-data.flat")
			if err := os.WriteFile(flat, []byte(flatten(t, bb, tc.meta)), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bb, "sh", script, flat)
			cmd.Env = []string{"PATH=" + bin, "GPUAAS_META=" + flat}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if ok := err == nil; ok != tc.wantOK {
				t.Errorf("passed = %v; want %v (output %q)", ok, tc.wantOK, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output %q; want it to contain %q", out, w)
				}
			}
		})
	}
	// Only -L is answered.
	cmd := exec.Command(smi, "--query-gpu=uuid")
	cmd.Env = []string{"PATH=" + bin}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("nvidia-smi --query-gpu answered %q; want a refusal", out)
	}
}

// TestDriverCheckListsUUIDs: the production image's driver check
// (python3) prints one "uuid: " line per GPU nvidia-smi -L lists, after
// its verdict: the marker text hostd parses. The host has no nvidia-smi;
// the test image's simulated one stands in, on PATH for this run only.
func TestDriverCheckListsUUIDs(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not installed; the guest's driver check is a python3 script")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "driver-check")
	if err := os.WriteFile(script, []byte(driverCheckScript), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(simNvidiaSMIScript), 0o755); err != nil {
		t.Fatal(err)
	}
	flat := filepath.Join(dir, "meta-data.flat")
	const a = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
	if err := os.WriteFile(flat, []byte(MetaSimGPUUUIDs+"\t"+a+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "instance-data.json")
	if err := os.WriteFile(data, []byte(`{"ds":{"meta_data":{"instance-id":"i","gpuaas-gpus":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script, data)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "GPUAAS_META=" + flat}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("driver check: %v\n%s", err, out)
	}
	if want := "ok: 1 GPUs (instance i)\n" + DriverCheckUUIDPrefix + SimUUIDPrefix + "aaaaaaaa-0000-0000-0000-000000000001\n"; string(out) != want {
		t.Errorf("output %q; want %q", out, want)
	}
}
