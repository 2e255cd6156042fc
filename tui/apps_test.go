package tui

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAppRunFromThePicker: a on an active allocation lists the published
// apps its project may run (app.list for that project), with scope,
// image, trust and ports; enter asks, y runs the chosen app through
// app.run on that allocation with nothing but the app (controld fills
// its manifest), and the new workload shows in its details.
func TestAppRunFromThePicker(t *testing.T) {
	b := newWorkBackend()
	m := newTestModel(t, b)
	press(m, "j", "j") // a-metl00000003, of p-ml
	drain(t, m, press(m, "a"))
	v := m.View()
	if m.mode != modeApps || !strings.Contains(v, "notebook") || !strings.Contains(v, "8080/http,2222/tcp") ||
		!strings.Contains(v, "8888/http") || !strings.Contains(v, "verified") || !strings.Contains(v, "ml") {
		t.Fatalf("after a: mode %d; want the picker listing jupyter and notebook with their ports\n%s", m.mode, v)
	}
	b.mu.Lock()
	reqs := slices.Clone(b.work.appsReqs)
	b.mu.Unlock()
	if !slices.Equal(reqs, []string{"p-ml"}) {
		t.Fatalf("app.list asked for projects %q; want the allocation's, p-ml", reqs)
	}
	press(m, "j", "enter")
	if m.mode != modeAppConfirm || !strings.Contains(m.View(), "Run notebook on a-metl00000003? (y/n)") {
		t.Fatalf("after enter: mode %d; want the question\n%s", m.mode, m.View())
	}
	drain(t, m, press(m, "y"))
	b.mu.Lock()
	ran := slices.Clone(b.work.ran)
	b.mu.Unlock()
	if len(ran) != 1 || !reflect.DeepEqual(ran[0], api.AppRunRequest{Image: "ap-note000002", AllocationID: "a-metl00000003"}) {
		t.Fatalf("app.run calls %+v; want the app ap-note000002 on a-metl00000003 and nothing else", ran)
	}
	if m.mode != modeNormal || m.flashErr || !strings.Contains(m.flash, "w-new000000001") {
		t.Fatalf("mode %d flash %q (error %v); want the new workload said", m.mode, m.flash, m.flashErr)
	}
	if v := m.View(); !m.detailOpen || !strings.Contains(v, "w-new000000001") || !strings.Contains(v, "pending") {
		t.Fatalf("the details do not show the new workload:\n%s", v)
	}
	// It runs: its event updates the row.
	w := api.Workload{ID: "w-new000000001", ProjectID: "p-dev", AllocationID: "a-metl00000003", Name: "notebook", Image: "tiny", State: api.WorkloadRunning}
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
	if v := m.View(); !strings.Contains(v, "app run notebook on a-metl00000003: image tiny is revoked") {
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

// TestAppPickerWithNoApps: a project with no app to run says so, and how
// to publish one; enter runs nothing.
func TestAppPickerWithNoApps(t *testing.T) {
	b := newWorkBackend()
	b.work.apps = nil
	m := newTestModel(t, b)
	press(m, "j", "j")
	drain(t, m, press(m, "a"))
	if v := m.View(); !strings.Contains(v, "No apps to run here yet") || !strings.Contains(v, "gpuaas app publish -f app.yaml") ||
		!strings.Contains(v, "gpuaas app promote NAME") {
		t.Fatalf("an empty catalog does not say how to publish:\n%s", v)
	}
	if cmd := press(m, "enter"); cmd != nil || m.mode != modeApps {
		t.Fatalf("enter on no apps: mode %d; want the picker, nothing run", m.mode)
	}
}

// TestWorkloadRowSaysWhyItEnded: a workload.state event that ends a
// workload shows in its row with its state, exit code, its app's ports
// and the node's reason, with no read of controld.
func TestWorkloadRowSaysWhyItEnded(t *testing.T) {
	b := newWorkBackend()
	m := newTestModel(t, b)
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	drain(t, m, press(m, "j", "j", "enter")) // a-metl00000003
	w := fixtureWorkloads()[0]
	w.State, w.ExitCode, w.Reason = api.WorkloadFailed, intp(125), "pull failed: digest mismatch"
	b.mu.Lock()
	b.calls = nil
	b.mu.Unlock()
	m.applyEvent(workloadEvent(t, w).ev)
	v := m.View()
	i := strings.Index(v, "w-jupy00000001")
	if i < 0 {
		t.Fatalf("the pane does not list the workload:\n%s", v)
	}
	row, _, _ := strings.Cut(v[i:], "\n")
	for _, want := range []string{"jupyter", "failed", "exit 125", "ports 8888/http", "pull failed: digest mismatch"} {
		if !strings.Contains(row, want) {
			t.Fatalf("the workload's row %q does not say %q", row, want)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if slices.ContainsFunc(b.calls, func(c string) bool { return strings.HasPrefix(c, "workloads ") }) {
		t.Fatalf("the event led to reads %v; want none", b.calls)
	}
}

// TestWorkloadRowShowsItsAppsPorts: a workload that runs a published app
// as published (its name, image and command) shows the app's ports; one
// run under another name, or with another command, shows none.
func TestWorkloadRowShowsItsAppsPorts(t *testing.T) {
	b := newWorkBackend()
	renamed := fixtureWorkloads()[0]
	renamed.ID, renamed.Name = "w-rena00000002", "lab2"
	other := fixtureWorkloads()[0]
	// notebook's name and image, not its command (/bin/httpd -f).
	other.ID, other.Name, other.Image, other.ImageID, other.Command = "w-othr00000003", "notebook", "tiny", "i-tiny0000002", []string{"/bin/sh"}
	b.work.workloads = append(b.work.workloads, renamed, other)
	m := newTestModel(t, b)
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	drain(t, m, press(m, "j", "j", "enter")) // a-metl00000003
	rows := map[string]string{}
	for _, l := range strings.Split(m.View(), "\n") {
		if i := strings.Index(l, "w-"); i >= 0 {
			rows[l[i:i+14]] = l
		}
	}
	if !strings.Contains(rows["w-jupy00000001"], "ports 8888/http") {
		t.Fatalf("jupyter's row %q does not show its ports\n%s", rows["w-jupy00000001"], m.View())
	}
	for _, id := range []string{"w-rena00000002", "w-othr00000003"} {
		if r, ok := rows[id]; !ok || strings.Contains(r, "ports") {
			t.Fatalf("%s's row %q: want it listed, with no ports", id, r)
		}
	}
}
