package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Tasks that start and end an allocation's paid time.
var (
	provisionTasks = []string{api.TaskVMProvision, api.TaskProvisionUser}
	releaseTasks   = []string{api.TaskVMRelease, api.TaskDeprovisionUser}
)

// activeSpan is how long a has been (or was) active as of now: from the
// end of its provisioning to the start of its release, per its timeline;
// without a timeline, from its last change while it is active.
func activeSpan(a api.Allocation, now time.Time) time.Duration {
	var start, end time.Time
	for _, p := range a.Timeline {
		switch {
		case slices.Contains(provisionTasks, p.Task) && p.Status == api.PhaseDone && p.At.After(start):
			start = p.At
		case slices.Contains(releaseTasks, p.Task) && end.IsZero():
			end = p.At
		}
	}
	switch a.State {
	case api.AllocActive:
		if start.IsZero() {
			start = a.UpdatedAt
		}
		end = now
	case api.AllocReleasing, api.AllocReleased, api.AllocReleaseFailed:
		if end.IsZero() {
			end = a.UpdatedAt
		}
	default: // requested, provisioning, failed: never active
		return 0
	}
	if start.IsZero() || end.Before(start) {
		return 0
	}
	return end.Sub(start)
}

// hourlyMinor is what a costs per hour: the SKU's price per GPU-hour
// times its GPUs.
func hourlyMinor(s api.SKU, gpus int) int64 { return s.PricePerGPUHourMinor * int64(gpus) }

// costMinor is what d of a costs, rounded down to a minor unit.
func costMinor(s api.SKU, gpus int, d time.Duration) int64 {
	return hourlyMinor(s, gpus) * int64(d) / int64(time.Hour)
}

// burnMinor is what the active allocations cost per hour together, and
// their currency.
func (m *Model) burnMinor() (int64, string) {
	var total int64
	currency := ""
	for _, a := range m.allocs {
		if a.State != api.AllocActive {
			continue
		}
		if s, ok := m.skuByID(a.SKU); ok {
			total += hourlyMinor(s, a.GPUs)
			currency = s.Currency
		}
	}
	return total, currency
}

// renderDetail renders the details of the selection, at most h lines of
// width w (without the border).
func (m *Model) renderDetail(w, h int) string {
	sel, ok := m.selected()
	if !ok {
		return m.st.dim.Render("nothing selected")
	}
	a := sel
	if m.detail != nil && m.detail.ID == sel.ID {
		a = *m.detail
		if sel.Version > a.Version { // an event came after the read
			a.State, a.Reason, a.UpdatedAt = sel.State, sel.Reason, sel.UpdatedAt
		}
	}
	now := m.now()
	var lines []string
	add := func(label, value string) {
		lines = append(lines, m.st.dim.Render(fit(label, 9, false))+" "+fit(value, max(1, w-10), false))
	}
	state := a.State
	if a.Queued {
		state += " (queued)"
	}
	lines = append(lines, m.st.bold.Render(a.ID)+"  "+m.st.state(a.State).Render(state)+"  "+
		m.st.dim.Render(fmt.Sprintf("%s · %s × %d GPU", a.SKU, a.Shape, a.GPUs)))
	if s, ok := m.skuByID(a.SKU); ok {
		d := activeSpan(a, now)
		add("cost", fmt.Sprintf("%s so far at %s/h (%s active, est.)", api.FormatMoney(costMinor(s, a.GPUs, d), s.Currency),
			api.FormatMoney(hourlyMinor(s, a.GPUs), s.Currency), cmdutil.FuzzyDuration(d)))
	}
	add("ssh", "gpuaas ssh "+a.ID+"  or  ssh "+a.ID+"@<gateway>")
	if a.Reason != "" {
		add("reason", a.Reason)
	}
	where := a.NodeID
	if len(a.Slots) > 0 {
		where += "  slots " + slotList(a.Slots)
	}
	if where != "" {
		add("node", where)
	}
	add("project", a.ProjectID+m.st.dim.Render("  created "+cmdutil.FuzzyAgo(now, a.CreatedAt)))
	lines = append(lines, m.st.paneTitle.Render("timeline"))
	switch {
	case m.detailErr != nil:
		lines = append(lines, m.st.bad.Render(errorText(m.detailErr)))
	case m.detail == nil || m.detail.ID != sel.ID:
		lines = append(lines, m.st.dim.Render("loading…"))
	default:
		lines = append(lines, m.timelineLines(a.Timeline, w)...)
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	return strings.Join(lines, "\n")
}

// timelineLines are the finished steps of a timeline, newest last.
func (m *Model) timelineLines(tl []api.PhaseTiming, w int) []string {
	var out []string
	for _, p := range tl {
		if p.Status == api.PhaseStarted {
			continue
		}
		status := p.Status
		switch p.Status {
		case api.PhaseDone:
			status = m.st.ok.Render(fit(status, 7, false))
		case api.PhaseFailed:
			status = m.st.bad.Render(fit(status, 7, false))
		default:
			status = m.st.warn.Render(fit(status, 7, false))
		}
		task := p.Task
		if i := strings.LastIndexByte(task, '.'); i >= 0 {
			task = task[i+1:]
		}
		line := fmt.Sprintf("%s %s %s %s", p.At.UTC().Format("15:04:05"), fit(task, 14, false), fit(p.Phase, 16, false), status)
		line += fit(strconv.FormatInt(p.ElapsedMS, 10)+"ms", 8, true)
		out = append(out, fit(line, w, false))
	}
	if len(out) == 0 {
		out = append(out, m.st.dim.Render("no host steps yet"))
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
