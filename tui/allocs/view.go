package allocs

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fuzzytime"
	"github.com/gpuaas/gpuaas/tui/common"
)

// columns are the table's columns for a given width: the node column
// only when there is room, GPU utilisation once any is known.
func (m *Model) columns(width int) []common.Column {
	cols := []common.Column{{Title: "ID", Width: 14}, {Title: "STATE", Width: 14}, {Title: "SKU", Width: 14}, {Title: "GPUS", Width: 4, Right: true}}
	if len(m.util) > 0 {
		cols = append(cols, common.Column{Title: "UTIL", Width: 4, Right: true})
	}
	if width >= 100 {
		cols = append(cols, common.Column{Title: "NODE", Width: 14})
	}
	return append(cols, common.Column{Title: "AGE", Width: 6, Right: true}, common.Column{Title: "$/HR", Width: 9, Right: true})
}

// cells are the texts of a's row.
func (m *Model) cells(a api.Allocation, cols []common.Column, now time.Time) []string {
	cells := []string{a.ID, a.State, a.SKU, strconv.Itoa(a.GPUs)}
	for _, c := range cols[len(cells):] {
		switch c.Title {
		case "UTIL":
			cells = append(cells, m.utilCell(a))
		case "NODE":
			cells = append(cells, a.NodeID)
		}
	}
	price := "—"
	if s, ok := common.SKUByID(m.skus, a.SKU); ok {
		price = api.FormatMoney(common.HourlyMinor(s, a.GPUs), s.Currency)
	}
	return append(cells, fuzzytime.Duration(now.Sub(a.CreatedAt)), price)
}

// View renders the header and the rows on screen.
func (m *Model) View() string {
	width, h := m.Width, m.Height
	st := m.Styles
	cols := m.columns(width)
	var b strings.Builder
	b.WriteString(st.Header.Render(common.Fit("  "+common.HeaderLine(cols), width, false)))
	if !m.loaded {
		b.WriteString("\n" + st.Dim.Render(m.loadingText()))
		return b.String()
	}
	if len(m.rows) == 0 {
		msg := "No allocations. Press c to create one."
		if m.filter != "" {
			msg = "No allocations match /" + m.filter + " (esc clears the filter)."
		}
		b.WriteString("\n" + st.Dim.Render(msg))
		return b.String()
	}
	now := m.Now()
	end := min(len(m.rows), m.offset+h)
	for r := m.offset; r < end; r++ {
		a := m.allocs[m.rows[r]]
		cells := m.cells(a, cols, now)
		b.WriteByte('\n')
		if r == m.cursor {
			parts := make([]string, len(cells))
			for i, c := range cells {
				parts[i] = common.Fit(c, cols[i].Width, cols[i].Right)
			}
			b.WriteString(st.Selected.Render(common.Fit("› "+strings.Join(parts, "  "), width, false)))
			continue
		}
		b.WriteString("  ")
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			cell := common.Fit(c, cols[i].Width, cols[i].Right)
			if i == 1 {
				cell = st.State(a.State).Render(cell)
			}
			b.WriteString(cell)
		}
	}
	return b.String()
}

func (m *Model) loadingText() string {
	if m.loadErr != nil {
		return "cannot list allocations: " + common.ErrorText(m.loadErr)
	}
	return "loading…"
}
