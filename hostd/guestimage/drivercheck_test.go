package guestimage

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDriverCheck runs the guest's driver check script (the same text
// the image carries) with python3 against instance data as cloud-init
// writes it. This host has no nvidia-smi, so any GPU count above zero
// must fail closed.
func TestDriverCheck(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not installed; the guest's driver check is a python3 script")
	}
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Fatal("nvidia-smi is installed here; this test expects a host without it")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "driver-check")
	if err := os.WriteFile(script, []byte(driverCheckScript), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, data string // "" writes no instance data
		wantOK     bool
		want       string
	}{
		{"no GPUs", `{"ds":{"meta_data":{"instance-id":"a","gpuaas-gpus":0}}}`, true, "ok: no GPUs expected (instance a)"},
		{"no key", `{"ds":{"meta_data":{"instance-id":"a"}}}`, true, "ok: no GPUs expected"},
		{"forced", `{"ds":{"meta_data":{"instance-id":"a","gpuaas-gpus":0,"gpuaas-driver-check":"fail"}}}`, false, "forced to fail by the seed"},
		{"GPUs without a driver", `{"ds":{"meta_data":{"instance-id":"a","gpuaas-gpus":2}}}`, false, "expected 2 GPUs but nvidia-smi is not installed"},
		{"count not a number", `{"ds":{"meta_data":{"instance-id":"a","gpuaas-gpus":"two"}}}`, false, "is not a number"},
		{"no meta-data", `{"ds":{}}`, false, "the NoCloud seed was not read"},
		{"no instance data", "", false, "the NoCloud seed was not read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "instance-data.json")
			if tc.data != "" {
				if err := os.WriteFile(data, []byte(tc.data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.Command(py, script, data).CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if ok := err == nil; ok != tc.wantOK {
				t.Errorf("passed = %v; want %v (output %q)", ok, tc.wantOK, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output %q; want it to contain %q", out, tc.want)
			}
		})
	}
}
