package alloc

import (
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// steps builds a task's timeline: "lease/started" is its phase 1, and so
// on.
func steps(taskType, taskID string, phases ...string) []api.PhaseTiming {
	out := make([]api.PhaseTiming, 0, len(phases))
	for i, ps := range phases {
		phase, status, _ := strings.Cut(ps, "/")
		out = append(out, api.PhaseTiming{Task: taskType, TaskID: taskID, PhaseSeq: i + 1, Phase: phase, Status: status,
			At: now})
	}
	return out
}

var (
	provisioned = steps(api.TaskVMProvision, "t-prov", "lease/started", "lease/done", "readiness/started", "readiness/done")
	released    = steps(api.TaskVMRelease, "t-rel", "shutdown/started", "shutdown/done", "release_leases/started",
		"release_leases/done")
)

// timeline is the first n steps of each task, in order.
func timeline(nProv, nRel int) []api.PhaseTiming {
	return append(append([]api.PhaseTiming{}, provisioned[:nProv]...), released[:nRel]...)
}

// showReads runs a wait's display over successive reads of a-1 and
// returns its plain lines (phase lines as "phase status").
func showReads(t *testing.T, history bool, want []string, reads ...api.Allocation) []string {
	t.Helper()
	ios, _, _, errOut := cmdtest.Streams(false)
	v := newProgressView(ios, "a-1")
	s := newShownPhases(want)
	for i := range reads {
		a := &reads[i]
		a.ID = "a-1"
		done, _ := reached(a, want)
		s.show(v, a, history && i == 0, done)
		if done {
			break
		}
	}
	v.stop()
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] != "a-1" {
			l = f[0] + " " + f[1]
		}
		lines = append(lines, l)
	}
	return lines
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReleaseWaitShowsOnlyReleasePhases: `alloc release --wait` replayed
// the provisioning phases under "is releasing" and printed "is released"
// before the last phases. It shows the release's phases, each once, and
// the final state last.
func TestReleaseWaitShowsOnlyReleasePhases(t *testing.T) {
	got := showReads(t, false, []string{api.AllocReleased},
		api.Allocation{State: api.AllocReleasing, Timeline: timeline(4, 0)},
		api.Allocation{State: api.AllocReleasing, Timeline: timeline(4, 1)},
		api.Allocation{State: api.AllocReleasing, Timeline: timeline(4, 1)}, // a poll with nothing new
		// The last read brings the state and the last phases together.
		api.Allocation{State: api.AllocReleased, Timeline: timeline(4, 4)},
	)
	wantLines(t, got,
		"a-1 is releasing",
		"shutdown started",
		"shutdown done",
		"release_leases started",
		"release_leases done",
		"a-1 is released")
}

// TestCreateWaitShowsPhasesOfOperationOverAtFirstRead: with no phase
// delays provisioning can be over by the first read; `alloc create
// --wait` still shows its phases, then the state, and not the cleanup of
// a failure.
func TestCreateWaitShowsPhasesOfOperationOverAtFirstRead(t *testing.T) {
	got := showReads(t, false, []string{api.AllocActive},
		api.Allocation{State: api.AllocActive, Timeline: timeline(4, 0)})
	wantLines(t, got, "lease started", "lease done", "readiness started", "readiness done", "a-1 is active")

	got = showReads(t, false, []string{api.AllocActive},
		api.Allocation{State: api.AllocProvisioning, Timeline: timeline(1, 0)},
		api.Allocation{State: api.AllocFailed, Timeline: timeline(3, 2)})
	wantLines(t, got, "a-1 is provisioning", "lease started", "lease done", "readiness started", "a-1 is failed")
}

// TestAllocWaitDoesNotReprintHistory: `alloc wait` on an allocation
// already where it is going prints its state alone, not the phases of
// operations that ended before it started; `alloc wait --for released`
// on one being released shows the release so far, not provisioning.
func TestAllocWaitDoesNotReprintHistory(t *testing.T) {
	got := showReads(t, true, []string{api.AllocActive},
		api.Allocation{State: api.AllocActive, Timeline: timeline(4, 0)})
	wantLines(t, got, "a-1 is active")

	got = showReads(t, true, []string{api.AllocReleased},
		api.Allocation{State: api.AllocReleased, Timeline: timeline(4, 4)})
	wantLines(t, got, "a-1 is released")

	got = showReads(t, true, []string{api.AllocReleased},
		api.Allocation{State: api.AllocReleasing, Timeline: timeline(4, 2)},
		api.Allocation{State: api.AllocReleased, Timeline: timeline(4, 4)})
	wantLines(t, got, "a-1 is releasing", "shutdown started", "shutdown done", "release_leases started",
		"release_leases done", "a-1 is released")
}
