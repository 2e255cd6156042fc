// Package detail is the dashboard's detail pane: the selected allocation's
// state, cost so far, how to ssh in, where it runs, and its provisioning
// timeline.
package detail

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fuzzytime"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/common"
)

// Selection is where the pane finds the allocation it describes: the
// table's cursor. The pane reads it on every frame, so it never shows a
// copy that went stale.
type Selection interface {
	Selected() (api.Allocation, bool)
}

// Getter is what the pane asks of controld: one allocation with its
// timeline, and what runs on it (work.go).
type Getter interface {
	GetAlloc(ctx context.Context, id string) (*api.Allocation, error)
	ListJobs(ctx context.Context, req api.JobListRequest) ([]api.Job, error)
	ListWorkloads(ctx context.Context, allocID string) ([]api.Workload, error)
	ListApps(ctx context.Context, project string) ([]api.App, error)
}

// LoadedMsg is the answer to Load.
type LoadedMsg struct {
	Alloc *api.Allocation
	Err   error
}

// Model is the detail pane, border included in its size.
type Model struct {
	common.Common
	ctx  context.Context
	get  Getter
	sel  Selection
	skus []api.SKU
	// sshLine is how to reach an allocation from the user's terminal.
	sshLine func(allocID string) string

	alloc *api.Allocation // the selected allocation with its timeline
	err   error
	work  work // its jobs and workloads
}

var _ common.Component = (*Model)(nil)

// New returns the pane describing what sel selects, reading timelines
// from g within ctx, and showing sshLine(id) as the way in (nil: `gpuaas
// ssh ID`).
func New(ctx context.Context, c common.Common, g Getter, sel Selection, sshLine func(allocID string) string) *Model {
	if sshLine == nil {
		sshLine = func(id string) string { return "gpuaas ssh " + id }
	}
	return &Model{Common: c, ctx: ctx, get: g, sel: sel, sshLine: sshLine}
}

// Update takes a LoadedMsg. Reads answer in any order: one older than
// what the pane shows (a lower version, or as many steps or fewer of the
// same version) is dropped, so a phase once shown stays shown.
func (m *Model) Update(msg tea.Msg) (common.Component, tea.Cmd) {
	if msg, ok := msg.(WorkMsg); ok {
		m.setWork(msg)
	}
	if msg, ok := msg.(LoadedMsg); ok {
		if msg.Err == nil && stale(m.alloc, msg.Alloc) {
			return m, nil
		}
		m.err = msg.Err
		if msg.Err == nil {
			m.alloc = msg.Alloc
		}
	}
	return m, nil
}

// stale reports whether read b of an allocation is older than a.
func stale(a, b *api.Allocation) bool {
	if a == nil || b == nil || a.ID != b.ID {
		return false
	}
	return b.Version < a.Version || (b.Version == a.Version && len(b.Timeline) < len(a.Timeline))
}

// ShortHelp is nil: the pane has no keys of its own.
func (m *Model) ShortHelp() []key.Binding { return nil }

// SetCatalog gives the pane the SKUs, for the cost.
func (m *Model) SetCatalog(skus []api.SKU) { m.skus = skus }

// Alloc is the allocation last read, nil before the first read.
func (m *Model) Alloc() *api.Allocation { return m.alloc }

// Show prepares the pane for id: what it holds of another allocation is
// dropped, so it says "loading…" until Load answers.
func (m *Model) Show(id string) {
	if m.alloc == nil || m.alloc.ID != id {
		m.alloc, m.err = nil, nil
	}
	if m.work.allocID != id {
		m.work = work{}
	}
}

// Load reads id's details.
func (m *Model) Load(id string) tea.Cmd {
	g, ctx := m.get, m.ctx
	return func() tea.Msg {
		a, err := backend.Call(ctx, func(ctx context.Context) (*api.Allocation, error) { return g.GetAlloc(ctx, id) })
		return LoadedMsg{a, err}
	}
}

// Upsert takes a newer version of the allocation shown (from an event
// or the list), keeping the timeline when a has none.
func (m *Model) Upsert(a api.Allocation) {
	if m.alloc != nil && m.alloc.ID == a.ID && a.Version >= m.alloc.Version {
		tl := m.alloc.Timeline
		m.alloc = &a
		if len(a.Timeline) == 0 {
			m.alloc.Timeline = tl
		}
	}
}

// View renders the pane with its border; nothing when it has no room for
// its border and a line.
func (m *Model) View() string {
	if m.Height < 3 || m.Width < 5 {
		return ""
	}
	return m.Styles.Pane.Width(m.Width - 2).Height(m.Height - 2).Render(m.render(m.Width-4, m.Height-2))
}

// render renders the details of the selection, at most h lines of width
// w (without the border).
func (m *Model) render(w, h int) string {
	st := m.Styles
	sel, ok := m.sel.Selected()
	if !ok {
		return st.Dim.Render("nothing selected")
	}
	a := sel
	if m.alloc != nil && m.alloc.ID == sel.ID {
		a = *m.alloc
		if sel.Version > a.Version { // an event came after the read
			a.State, a.Reason, a.UpdatedAt = sel.State, sel.Reason, sel.UpdatedAt
		}
	}
	now := m.Now()
	var lines []string
	add := func(label, value string) {
		lines = append(lines, st.Dim.Render(common.Fit(label, 9, false))+" "+common.Fit(value, max(1, w-10), false))
	}
	state := a.State
	if a.Queued {
		state += " (queued)"
	}
	lines = append(lines, st.Bold.Render(a.ID)+"  "+st.State(a.State).Render(state)+"  "+
		st.Dim.Render(fmt.Sprintf("%s · %s × %d GPU", a.SKU, a.Shape, a.GPUs)))
	if s, ok := common.SKUByID(m.skus, a.SKU); ok {
		d := activeSpan(a, now)
		add("cost", fmt.Sprintf("%s so far at %s/h (%s active, est.)", api.FormatMoney(costMinor(s, a.GPUs, d), s.Currency),
			api.FormatMoney(common.HourlyMinor(s, a.GPUs), s.Currency), fuzzytime.Duration(d)))
	}
	add("ssh", m.sshLine(a.ID))
	if a.Reason != "" {
		add("reason", common.Text(a.Reason))
	}
	where := a.NodeID
	if len(a.Slots) > 0 {
		where += "  slots " + slotList(a.Slots)
	}
	if where != "" {
		add("node", where)
	}
	add("project", a.ProjectID+st.Dim.Render("  created "+fuzzytime.Ago(now, a.CreatedAt)))
	lines = append(lines, m.workLines(a.ID, w)...)
	op := operation(a.State)
	lines = append(lines, st.PaneTitle.Render("timeline")+st.Dim.Render(" · "+op))
	switch {
	case m.err != nil:
		lines = append(lines, st.Bad.Render(common.ErrorText(m.err)))
	case m.alloc == nil || m.alloc.ID != sel.ID:
		lines = append(lines, st.Dim.Render("loading…"))
	default:
		// The newest steps and the final state stay in view: the oldest
		// steps give way when the pane is short.
		tl := m.timelineLines(a, op, w)
		if room := h - len(lines); room > 0 && len(tl) > room {
			tl = tl[len(tl)-room:]
		}
		lines = append(lines, tl...)
	}
	if len(lines) > h {
		lines = lines[:max(0, h)]
	}
	return strings.Join(lines, "\n")
}

// operation is the operation an allocation in state is in, or last went
// through: its provisioning, or its release.
func operation(state string) string {
	switch state {
	case api.AllocReleasing, api.AllocReleased, api.AllocReleaseFailed:
		return api.OpRelease
	}
	return api.OpProvision
}

// ended reports whether state ends operation op: the state line then
// follows the op's last step.
func ended(op, state string) bool {
	if op == api.OpRelease {
		return state == api.AllocReleased || state == api.AllocReleaseFailed
	}
	return state == api.AllocActive || state == api.AllocFailed
}

// currentSteps are the timeline's steps of op: those of its latest task
// (an operation is one task; a retried release is a new one), in order.
func currentSteps(tl []api.PhaseTiming, op string) []api.PhaseTiming {
	task, found := "", false
	for _, p := range slices.Backward(tl) {
		if api.TaskOperation(p.Task) == op {
			task, found = p.TaskID, true
			break
		}
	}
	var out []api.PhaseTiming
	for _, p := range tl {
		if found && p.TaskID == task && api.TaskOperation(p.Task) == op {
			out = append(out, p)
		}
	}
	return out
}

// timelineLines are the finished steps of a's operation op, newest last,
// then, once the operation is over, the state it ended in.
func (m *Model) timelineLines(a api.Allocation, op string, w int) []string {
	st := m.Styles
	var out []string
	for _, p := range currentSteps(a.Timeline, op) {
		if p.Status == api.PhaseStarted {
			continue
		}
		status := p.Status
		switch p.Status {
		case api.PhaseDone:
			status = st.OK.Render(common.Fit(status, 7, false))
		case api.PhaseFailed:
			status = st.Bad.Render(common.Fit(status, 7, false))
		default:
			status = st.Warn.Render(common.Fit(status, 7, false))
		}
		task := common.Text(p.Task)
		if i := strings.LastIndexByte(task, '.'); i >= 0 {
			task = task[i+1:]
		}
		line := fmt.Sprintf("%s %s %s %s", p.At.UTC().Format("15:04:05"), common.Fit(task, 14, false), common.Fit(common.Text(p.Phase), 16, false), status)
		line += common.Fit(strconv.FormatInt(p.ElapsedMS, 10)+"ms", 8, true)
		out = append(out, common.Fit(line, w, false))
	}
	if len(out) == 0 {
		out = append(out, st.Dim.Render("no host steps yet"))
	}
	if ended(op, a.State) {
		out = append(out, common.Fit(a.UpdatedAt.UTC().Format("15:04:05")+" "+st.State(a.State).Render(a.State), w, false))
	}
	return out
}

// slotList lists slots as "#0 #1 (numa 0)".
func slotList(slots []api.Slot) string {
	parts := make([]string, 0, len(slots))
	var numa []string
	for _, s := range slots {
		parts = append(parts, "#"+strconv.Itoa(s.Index))
		if n := strconv.Itoa(s.NUMANode); !slices.Contains(numa, n) {
			numa = append(numa, n)
		}
	}
	return strings.Join(parts, " ") + " (numa " + strings.Join(numa, ",") + ")"
}
