package detail

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/muesli/termenv"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/common"
)

// selection is a table cursor on one allocation.
type selection struct{ a api.Allocation }

func (s *selection) Selected() (api.Allocation, bool) { return s.a, true }

// steps builds a task's timeline: "lease/started" is its phase 1.
func steps(taskType, taskID string, at time.Time, phases ...string) []api.PhaseTiming {
	out := make([]api.PhaseTiming, 0, len(phases))
	for i, ps := range phases {
		phase, status, _ := strings.Cut(ps, "/")
		out = append(out, api.PhaseTiming{Task: taskType, TaskID: taskID, PhaseSeq: i + 1, Phase: phase, Status: status,
			At: at.Add(time.Duration(i) * time.Second)})
	}
	return out
}

// timelineOf renders the pane over a as read and returns the lines of
// its timeline section, without the title.
func timelineOf(t *testing.T, m *Model, sel *selection, reads ...api.Allocation) []string {
	t.Helper()
	for i := range reads {
		sel.a = reads[i]
		m.Update(LoadedMsg{Alloc: &reads[i]})
	}
	v := m.render(100, 40)
	_, after, ok := strings.Cut(v, "timeline")
	if !ok {
		t.Fatalf("no timeline in\n%s", v)
	}
	lines := strings.Split(after, "\n")[1:]
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return lines
}

// TestTUIShowsCurrentOperationPhasesOnceStateLast: the detail pane of an
// allocation being released shows the release's steps only, each once, in
// order, and its final state after the last; a read answered late (older
// than what the pane shows) does not take a step back.
func TestTUIShowsCurrentOperationPhasesOnceStateLast(t *testing.T) {
	sel := &selection{}
	m := New(context.Background(), common.Common{Styles: common.NewStyles(common.NewRenderer(nil, termenv.Ascii)),
		Keys: common.DefaultKeys(), Now: func() time.Time { return t0 }}, nil, sel, nil)
	m.SetSize(104, 44)
	prov := steps(api.TaskVMProvision, "t-prov", t0.Add(-time.Hour), "lease/started", "lease/done", "readiness/started", "readiness/done")
	rel := steps(api.TaskVMRelease, "t-rel", t0, "shutdown/started", "shutdown/done", "wipe/started", "wipe/done")
	base := api.Allocation{ID: "a-1", SKU: "h200-slice", GPUs: 1, Shape: api.ShapeGPUSlice, CreatedAt: t0.Add(-2 * time.Hour)}
	read := func(state string, version int64, tl ...[]api.PhaseTiming) api.Allocation {
		a := base
		a.State, a.Version, a.UpdatedAt = state, version, t0.Add(time.Minute)
		for _, part := range tl {
			a.Timeline = append(a.Timeline, part...)
		}
		return a
	}

	got := timelineOf(t, m, sel, read(api.AllocActive, 3, prov))
	want := []string{"14:09:27 vm_provision lease done 0ms", "14:09:29 vm_provision readiness done 0ms", "15:10:26 active"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("active: timeline\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	late := read(api.AllocReleasing, 4, prov, rel[:2])
	got = timelineOf(t, m, sel, read(api.AllocReleasing, 4, prov, rel), late)
	want = []string{"15:09:27 vm_release shutdown done 0ms", "15:09:29 vm_release wipe done 0ms"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("releasing, then a late read: timeline\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	got = timelineOf(t, m, sel, read(api.AllocReleased, 5, prov, rel))
	want = []string{"15:09:27 vm_release shutdown done 0ms", "15:09:29 vm_release wipe done 0ms", "15:10:26 released"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("released: timeline\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
