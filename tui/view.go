package tui

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Layout: a title line, the main area, the status bar, and one line for
// input, questions and messages.
const chromeLines = 3

// View renders the whole screen, exactly width × height cells.
func (m *Model) View() string {
	w, h := max(20, m.width), max(chromeLines+2, m.height)
	mainH := h - chromeLines
	var main string
	switch {
	case m.mode == modeHelp:
		main = m.help.View()
	case m.mode == modeWizard:
		main = m.wizard.View()
	case m.mode == modeApps || m.mode == modeAppConfirm:
		main = m.apps.View()
	case m.view == viewJobs:
		main = m.jobs.View()
	case m.view == viewNodes:
		main = m.nodes.View()
	default:
		main = m.table.View()
		if m.detailOpen && m.paneHeight() > 0 {
			main = fitLines(main, mainH-m.paneHeight(), w) + "\n" + m.pane.View()
		}
	}
	var b strings.Builder
	b.Grow(w * h * 2)
	b.WriteString(m.renderTitle(w))
	b.WriteByte('\n')
	b.WriteString(fitLines(main, mainH, w))
	b.WriteByte('\n')
	b.WriteString(m.renderStatus(w))
	b.WriteByte('\n')
	b.WriteString(m.renderBottom(w))
	return b.String()
}

// layout gives every component its size: the screen less the title, the
// status bar and the bottom line; the table less the detail pane when it
// is open.
func (m *Model) layout() {
	w, h := max(20, m.width), max(chromeLines+2, m.height)
	mainH := h - chromeLines
	m.table.SetSize(w, m.tableHeight())
	m.pane.SetSize(w, m.paneHeight())
	m.nodes.SetSize(w, mainH-1) // the header
	m.jobs.SetSize(w, mainH)
	m.apps.SetSize(w, mainH)
	m.help.SetSize(w, mainH)
	m.wizard.SetSize(w, mainH)
	m.input.SetSize(w, 1)
}

// paneHeight is the height of the detail pane, border included.
func (m *Model) paneHeight() int {
	mainH := max(chromeLines+2, m.height) - chromeLines
	return max(0, min(mainH-4, max(8, mainH*3/5)))
}

// tableHeight is how many allocation rows fit on screen.
func (m *Model) tableHeight() int {
	h := max(chromeLines+2, m.height) - chromeLines - 1 // the header
	if m.detailOpen {
		h -= m.paneHeight()
	}
	return max(1, h)
}

// fitLines cuts s to n lines of at most w cells, padding with empty lines.
func fitLines(s string, n, w int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "")
		}
	}
	for len(lines) < n {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}
