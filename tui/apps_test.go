package tui

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAppRunFromThePicker: a on an active allocation lists the runnable
// apps; enter asks, y runs the chosen one through app.run on that
// allocation, and the new workload shows in its details.
func TestAppRunFromThePicker(t *testing.T) {
	b := newWorkBackend()
	m := newTestModel(t, b)
	press(m, "j", "j") // a-metl00000003
	drain(t, m, press(m, "a"))
	if m.mode != modeApps || !strings.Contains(m.View(), "tiny") {
		t.Fatalf("after a: mode %d; want the picker listing tiny\n%s", m.mode, m.View())
	}
	press(m, "j", "enter")
	if m.mode != modeAppConfirm || !strings.Contains(m.View(), "Run tiny on a-metl00000003? (y/n)") {
		t.Fatalf("after enter: mode %d; want the question\n%s", m.mode, m.View())
	}
	drain(t, m, press(m, "y"))
	b.mu.Lock()
	ran := slices.Clone(b.work.ran)
	b.mu.Unlock()
	if len(ran) != 1 || ran[0].Image != "tiny" || ran[0].AllocationID != "a-metl00000003" {
		t.Fatalf("app.run calls %+v; want tiny on a-metl00000003", ran)
	}
	if m.mode != modeNormal || m.flashErr || !strings.Contains(m.flash, "w-new000000001") {
		t.Fatalf("mode %d flash %q (error %v); want the new workload said", m.mode, m.flash, m.flashErr)
	}
	if v := m.View(); !m.detailOpen || !strings.Contains(v, "w-new000000001") || !strings.Contains(v, "pending") {
		t.Fatalf("the details do not show the new workload:\n%s", v)
	}
	// It runs: its event updates the row.
	w := api.Workload{ID: "w-new000000001", ProjectID: "p-dev", AllocationID: "a-metl00000003", Name: "tiny", Image: "tiny", State: api.WorkloadRunning}
	m.applyEvent(workloadEvent(t, w).ev)
	if got := m.pane.Workloads(); got[len(got)-1].State != api.WorkloadRunning {
		t.Fatalf("after its event: %+v; want it running", got)
	}
}

// TestAppRunRefusalsShowInTheStatusBar: what app.run refuses, and a on
// an allocation that is not active, is said in the status bar; the
// dashboard goes on.
func TestAppRunRefusalsShowInTheStatusBar(t *testing.T) {
	b := newWorkBackend()
	b.work.runErr = api.Errorf(api.CodeConflict, "image tiny is revoked")
	m := newTestModel(t, b)
	press(m, "j", "j")
	drain(t, m, press(m, "a"))
	press(m, "j", "enter")
	drain(t, m, press(m, "y"))
	if m.mode != modeNormal || !m.flashErr || !strings.Contains(m.flash, "image tiny is revoked") {
		t.Fatalf("mode %d flash %q (error %v); want the refusal in the status bar", m.mode, m.flash, m.flashErr)
	}
	if v := m.View(); !strings.Contains(v, "app run tiny on a-metl00000003: image tiny is revoked") {
		t.Fatalf("the bottom line does not say it:\n%s", v)
	}
	press(m, "g") // a-prov00000001, provisioning
	if cmd := press(m, "a"); cmd != nil || m.mode != modeNormal || !strings.Contains(m.flash, "an app runs on an active allocation") {
		t.Fatalf("a on a provisioning allocation: mode %d flash %q; want refused in the status bar", m.mode, m.flash)
	}
	// n goes back to the picker, esc closes it.
	press(m, "j", "j")
	drain(t, m, press(m, "a"))
	press(m, "enter", "n")
	if m.mode != modeApps {
		t.Fatalf("n: mode %d; want the picker", m.mode)
	}
	press(m, "esc")
	if m.mode != modeNormal {
		t.Fatalf("esc: mode %d; want normal", m.mode)
	}
}
