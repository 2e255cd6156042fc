package jobs

import (
	"fmt"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fuzzytime"
	"github.com/gpuaas/gpuaas/tui/common"
)

// columns are the jobs table's columns: the allocation's only when there
// is room.
func columns(width int) []common.Column {
	cols := []common.Column{{Title: "ID", Width: 14}, {Title: "NAME", Width: 12}, {Title: "STATE", Width: 11},
		{Title: "EXIT", Width: 4, Right: true}, {Title: "STARTED", Width: 8}, {Title: "ENDED", Width: 8}, {Title: "AGE", Width: 5, Right: true}}
	if width >= 100 {
		cols = append(cols, common.Column{Title: "ALLOCATION", Width: 14})
	}
	return cols
}

// View renders the table, or the open log.
func (m *Model) View() string {
	if m.logs.open {
		return m.logView()
	}
	st := m.Styles
	cols := columns(m.Width)
	var b strings.Builder
	b.WriteString(st.Header.Render(common.Fit("  "+common.HeaderLine(cols), m.Width, false)))
	switch {
	case m.loadErr != nil && !m.loaded:
		return b.String() + "\n" + st.Bad.Render(common.ErrorText(m.loadErr))
	case !m.loaded:
		return b.String() + "\n" + st.Dim.Render("loading jobs…")
	case len(m.jobs) == 0:
		return b.String() + "\n" + st.Dim.Render("No jobs. `gpuaas run -f job.yaml` starts one.")
	}
	now := m.Now()
	for i := m.offset; i < min(len(m.jobs), m.offset+m.rowsOnScreen()); i++ {
		j := m.jobs[i]
		name := j.Name
		if name == "" {
			name = "-"
		}
		cells := []string{j.ID, common.Text(name), common.JobState(j), common.ExitText(j.ExitCode),
			common.Clock(j.StartedAt), common.Clock(j.EndedAt), fuzzytime.Duration(now.Sub(j.CreatedAt)), j.AllocationID}
		parts := make([]string, len(cols))
		for c, col := range cols {
			parts[c] = common.Fit(cells[c], col.Width, col.Right)
		}
		if i == m.cursor {
			b.WriteString("\n" + st.Selected.Render(common.Fit("› "+strings.Join(parts, "  "), m.Width, false)))
			continue
		}
		parts[2] = st.WorkState(j.State).Render(parts[2])
		b.WriteString("\n  " + strings.Join(parts, "  "))
	}
	return b.String()
}

// logView renders the open log: a title, then its last lines that fit.
func (m *Model) logView() string {
	st := m.Styles
	l := &m.logs
	j := l.job
	title := st.PaneTitle.Render("log of "+j.ID) + " " + st.WorkState(j.State).Render(common.JobState(j))
	if j.ExitCode != nil {
		title += fmt.Sprintf(" exit %d", *j.ExitCode)
	}
	status := "following"
	switch {
	case l.ended:
		status = "ended"
	case !l.read:
		status = "loading…"
	}
	title += st.Dim.Render(" · " + status)
	if j.Reason != "" {
		title += " " + common.Text(j.Reason)
	}
	if l.cut > 0 {
		title += st.Dim.Render(fmt.Sprintf(" · last %d lines (%d before)", len(l.lines), l.cut))
	}
	out := []string{common.Fit(title, m.Width, false)}
	if l.err != nil {
		out = append(out, st.Bad.Render(common.Fit(common.ErrorText(l.err)+" (retrying)", m.Width, false)))
	}
	room := max(0, m.Height-len(out))
	lines := l.lines[max(0, len(l.lines)-room):]
	if len(lines) == 0 && l.read {
		out = append(out, st.Dim.Render("no output yet"))
	}
	for _, ln := range lines {
		text := common.Fit(ln.Time.UTC().Format("15:04:05")+" "+common.Text(ln.Text), m.Width, false)
		switch ln.Stream {
		case api.LogStderr:
			text = st.Warn.Render(text)
		case api.LogMarker:
			text = st.Dim.Render(text)
		}
		out = append(out, text)
	}
	return strings.Join(out, "\n")
}
