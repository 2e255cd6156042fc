package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// progressCycles is how many create/release cycles
// TestWatchShowsEveryPhaseOnceInOrder runs.
const progressCycles = 50

// TestWatchShowsEveryPhaseOnceInOrder is "every phase once, in order"
// (docs/architecture.md, "Flows"): 50 create/release cycles on the simulated hosts
// with their phase delays at 0 (gpuaas dev injects none). In `gpuaas
// watch --json`, every phase of every task of every allocation appears
// exactly once, in the order of the task's timeline, between the state
// changes that bracket its operation; `alloc create --wait` and `alloc
// release --wait` show the phases of their own operation only, each once,
// in order, with the final state line last. Slices (vm_provision,
// vm_release) and bare metal (provision_user, deprovision_user) alternate.
func TestWatchShowsEveryPhaseOnceInOrder(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--hosts", "2")
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	w := dev.startWatch(t)

	var ids []string
	waited := map[string][]string{} // allocation → "op phase status" lines its --wait printed
	for i := range progressCycles {
		sku := []string{"--sku", "h200-slice", "--gpus", "1"}
		if i%2 == 1 {
			sku = []string{"--sku", "h100-baremetal"}
		}
		r := dev.gpuaas(t, "", append([]string{"alloc", "create", "--wait", "--timeout", "2m", "--json", "id", "--jq", ".id"}, sku...)...)
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("cycle %d: alloc create --wait: exit %d %q\n%s", i, r.code, r.stdout, r.stderr)
		}
		ids = append(ids, id)
		waited[id] = append(waited[id], waitPhases(t, "create --wait", id, r.stderr, api.AllocProvisioning, api.AllocActive)...)
		r = dev.gpuaas(t, "", "alloc", "release", id, "--yes", "--wait", "--timeout", "2m")
		if r.code != 0 {
			t.Fatalf("cycle %d: alloc release --wait: exit %d\n%s", i, r.code, r.stderr)
		}
		waited[id] = append(waited[id], waitPhases(t, "release --wait", id, r.stderr, api.AllocReleasing, api.AllocReleased)...)
	}

	last := ids[len(ids)-1]
	testutil.EventuallyWithin(t, time.Minute, "the watch to see the last release", func() bool {
		seen := watchedByAlloc(t, completeLines(w.stdout.String()))[last]
		return len(seen) > 0 && seen[len(seen)-1] == "state releasing>released"
	})
	w.stop(t)
	watched := watchedByAlloc(t, w.stdout.String())

	for _, id := range ids {
		r := dev.gpuaas(t, "", "alloc", "get", id, "--json", "timeline")
		var got struct {
			Timeline []api.PhaseTiming `json:"timeline"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
			t.Fatalf("alloc get %s: exit %d %q %s", id, r.code, r.stdout, r.stderr)
		}
		// The reference: each task's phases, numbered 1, 2, 3... without
		// a gap, provisioning first, bracketed by the state changes.
		want := []string{"state requested>provisioning"}
		var wantWaited []string
		tasks := map[string]int{}
		for _, p := range got.Timeline {
			if p.PhaseSeq != tasks[p.TaskID]+1 {
				t.Fatalf("%s: timeline step %s/%s of %s is number %d; want %d\n%+v", id, p.Phase, p.Status, p.TaskID,
					p.PhaseSeq, tasks[p.TaskID]+1, got.Timeline)
			}
			tasks[p.TaskID] = p.PhaseSeq
			op := api.TaskOperation(p.Task)
			if op == api.OpRelease && !strings.HasPrefix(want[len(want)-1], "progress "+api.OpRelease) {
				want = append(want, "state provisioning>active", "state active>releasing")
			}
			want = append(want, fmt.Sprintf("progress %s %s #%d %s %s", op, p.TaskID, p.PhaseSeq, p.Phase, p.Status))
			wantWaited = append(wantWaited, op+" "+p.Phase+" "+p.Status)
		}
		want = append(want, "state releasing>released")
		if len(tasks) != 2 {
			t.Fatalf("%s: timeline has %d tasks; want a provisioning and a release\n%+v", id, len(tasks), got.Timeline)
		}
		if g := strings.Join(watched[id], "\n"); g != strings.Join(want, "\n") {
			t.Errorf("%s: watch --json showed\n%s\nwant every phase once, in order:\n%s", id, g, strings.Join(want, "\n"))
		}
		if g := strings.Join(waited[id], "\n"); g != strings.Join(wantWaited, "\n") {
			t.Errorf("%s: --wait showed\n%s\nwant\n%s", id, g, strings.Join(wantWaited, "\n"))
		}
	}
}

// waitPhases checks the stderr of a --wait that followed id from state
// from to state to: the state lines first and last, each once, and phase
// lines between (release's cost line may follow). It returns the phase lines as "op phase status".
func waitPhases(t *testing.T, what, id, stderr, from, to string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	// After the wait, release sums up what the allocation cost.
	if n := len(lines); n > 1 && strings.HasPrefix(lines[n-1], "Allocation "+id+" cost ") {
		lines = lines[:n-1]
	}
	if len(lines) < 1 || lines[len(lines)-1] != id+" is "+to {
		t.Fatalf("%s of %s: stderr does not end with %q:\n%s", what, id, id+" is "+to, stderr)
	}
	lines = lines[:len(lines)-1]
	if len(lines) > 0 && lines[0] == id+" is "+from {
		lines = lines[1:]
	}
	op := api.OpProvision
	if to == api.AllocReleased {
		op = api.OpRelease
	}
	var out []string
	for _, l := range lines {
		f := strings.Fields(l)
		if !strings.HasPrefix(l, "  ") || len(f) < 2 {
			t.Fatalf("%s of %s: line %q is neither a phase nor the first or final state:\n%s", what, id, l, stderr)
		}
		out = append(out, op+" "+f[0]+" "+f[1])
	}
	return out
}

// watchedByAlloc reads `watch --json` output into each allocation's
// events, in the order printed: "state from>to" and "progress op task
// #n phase status".
func watchedByAlloc(t *testing.T, out string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("watch line %q is not a JSON event: %v", line, err)
		}
		switch ev.Kind {
		case api.EventAllocState:
			var c api.AllocStateChange
			if err := json.Unmarshal(ev.Data, &c); err != nil {
				t.Fatalf("alloc.state data %s: %v", ev.Data, err)
			}
			got[ev.Subject] = append(got[ev.Subject], "state "+c.From+">"+c.To)
		case api.EventAllocProgress:
			var p api.AllocProgress
			if err := json.Unmarshal(ev.Data, &p); err != nil {
				t.Fatalf("alloc.progress data %s: %v", ev.Data, err)
			}
			got[ev.Subject] = append(got[ev.Subject], fmt.Sprintf("progress %s %s #%d %s %s",
				api.TaskOperation(p.Task), p.TaskID, p.PhaseSeq, p.Phase, p.Status))
		}
	}
	return got
}

// completeLines is out up to its last newline: a line still being written
// is left out.
func completeLines(out string) string {
	return out[:strings.LastIndexByte(out, '\n')+1]
}
