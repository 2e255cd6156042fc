package alloc

import (
	"slices"

	"github.com/gpuaas/gpuaas/internal/api"
)

// shownPhases decides what a wait shows of each read of the allocation:
// the phases of the operation it follows (provisioning, or the release),
// each once, in the timeline's order, and the state — the final state
// line after the last phase.
type shownPhases struct {
	op    string
	shown map[phaseKey]bool
}

// phaseKey names a step of the timeline: its task and its number there.
type phaseKey struct {
	task string
	seq  int
}

// newShownPhases follows the operation that leads to want: the release
// for released, provisioning otherwise.
func newShownPhases(want []string) *shownPhases {
	op := api.OpProvision
	if slices.Contains(want, api.AllocReleased) {
		op = api.OpRelease
	}
	return &shownPhases{op: op, shown: map[phaseKey]bool{}}
}

// show passes the read a to view; done says the wait ends with it.
// history says a's operation, if over, was over before the wait began: a
// wait that starts with its allocation already there shows only the state
// (`alloc get` shows the phases).
func (s *shownPhases) show(view progressView, a *api.Allocation, history, done bool) {
	if history && done {
		view.state(a)
		return
	}
	if !done {
		view.state(a)
	}
	for _, p := range s.current(a.Timeline) {
		k := phaseKey{p.TaskID, p.PhaseSeq}
		if p.PhaseSeq == 0 { // a server without phase numbers: the step itself
			k = phaseKey{p.TaskID + "\x00" + p.Phase + "\x00" + p.Status + "\x00" + p.At.String(), 0}
		}
		if !s.shown[k] {
			s.shown[k] = true
			view.phase(p)
		}
	}
	if done {
		view.state(a)
	}
}

// current returns the timeline's steps of the operation followed: those
// of its latest task (an operation is one task; a retried release is a
// new one).
func (s *shownPhases) current(tl []api.PhaseTiming) []api.PhaseTiming {
	task := ""
	for _, p := range slices.Backward(tl) {
		if api.TaskOperation(p.Task) == s.op {
			task = p.TaskID
			break
		}
	}
	if task == "" {
		return nil
	}
	var out []api.PhaseTiming
	for _, p := range tl {
		if p.TaskID == task && api.TaskOperation(p.Task) == s.op {
			out = append(out, p)
		}
	}
	return out
}
