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
		main = m.renderHelp(w, mainH)
	case m.mode == modeWizard:
		main = m.renderWizard(w)
	case m.view == viewNodes:
		main = m.renderNodes(w, mainH-1)
	default:
		main = m.renderAllocTable(w, m.tableHeight())
		if m.detailOpen {
			ph := m.paneHeight()
			main = fitLines(main, mainH-ph, w) + "\n" +
				m.st.pane.Width(w-2).Height(ph-2).Render(m.renderDetail(w-4, ph-2))
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
