package tui

import (
	"slices"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// setAllocs replaces the list with what controld listed, keeping the
// selection on the same allocation.
func (m *Model) setAllocs(as []api.Allocation) {
	id := m.selectedID()
	m.allocs = as
	m.loaded = true
	m.rebuildRowsKeeping(id)
}

// upsert puts one allocation in the list: a newer version replaces the
// row, an older one (a late event) is ignored, a new one goes in by
// creation time, newest first.
func (m *Model) upsert(a api.Allocation) {
	id := m.selectedID()
	if i := slices.IndexFunc(m.allocs, func(x api.Allocation) bool { return x.ID == a.ID }); i >= 0 {
		if a.Version < m.allocs[i].Version {
			return
		}
		if len(a.Timeline) == 0 {
			a.Timeline = m.allocs[i].Timeline
		}
		m.allocs[i] = a
	} else {
		i := slices.IndexFunc(m.allocs, func(x api.Allocation) bool { return x.CreatedAt.Before(a.CreatedAt) })
		if i < 0 {
			i = len(m.allocs)
		}
		m.allocs = slices.Insert(m.allocs, i, a)
	}
	if m.detail != nil && m.detail.ID == a.ID && a.Version >= m.detail.Version {
		tl := m.detail.Timeline
		m.detail = &a
		if len(a.Timeline) == 0 {
			m.detail.Timeline = tl
		}
	}
	m.rebuildRowsKeeping(id)
}

func (m *Model) selectedID() string {
	a, _ := m.selected()
	return a.ID
}

func (m *Model) rebuildRows() { m.rebuildRowsKeeping(m.selectedID()) }

// rebuildRowsKeeping recomputes the visible rows (filter, recent) and puts
// the cursor back on id when it is still shown.
func (m *Model) rebuildRowsKeeping(id string) {
	m.rows = m.rows[:0]
	now := m.now()
	f := strings.ToLower(m.filter)
	for i, a := range m.allocs {
		if !m.showAll && finished(a.State) && now.Sub(a.UpdatedAt) > m.recent {
			continue
		}
		if f != "" && !matches(a, f) {
			continue
		}
		m.rows = append(m.rows, i)
	}
	if id != "" {
		m.selectID(id)
	}
	m.clampScroll()
}

// finished reports whether state is final.
func finished(state string) bool {
	return state == api.AllocReleased || state == api.AllocFailed
}

// matches reports whether the lower-case filter f is in any column of a.
func matches(a api.Allocation, f string) bool {
	for _, s := range []string{a.ID, a.State, a.SKU, a.NodeID, a.ProjectID, a.Shape} {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

func (m *Model) setFilter(f string) {
	m.filter = f
	m.rebuildRows()
}

// selectID moves the cursor to id if it is shown.
func (m *Model) selectID(id string) {
	for r, i := range m.rows {
		if m.allocs[i].ID == id {
			m.cursor = r
			m.clampScroll()
			return
		}
	}
}

// moveCursor moves the selection by d rows and re-reads the details of the
// new selection when they are open.
func (m *Model) moveCursor(d int) tea.Cmd {
	before := m.cursor
	m.cursor += d
	m.clampScroll()
	if m.cursor == before {
		return nil
	}
	return m.openDetail()
}

// clampScroll keeps the cursor in range and on screen.
func (m *Model) clampScroll() {
	m.cursor = max(0, min(m.cursor, len(m.rows)-1))
	h := max(1, m.tableHeight())
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+h {
		m.offset = m.cursor - h + 1
	}
	m.offset = max(0, min(m.offset, len(m.rows)-h))
}

// column is one column of a table.
type column struct {
	title string
	width int
	right bool
}

// allocColumns are the allocation table's columns for a given width: the
// node column only when there is room.
func allocColumns(width int) []column {
	cols := []column{{"ID", 14, false}, {"STATE", 14, false}, {"SKU", 14, false}, {"GPUS", 4, true}}
	if width >= 100 {
		cols = append(cols, column{"NODE", 14, false})
	}
	return append(cols, column{"AGE", 6, true}, column{"$/HR", 9, true})
}

// allocCells are the texts of a's row.
func (m *Model) allocCells(a api.Allocation, cols []column, now time.Time) []string {
	cells := []string{a.ID, a.State, a.SKU, strconv.Itoa(a.GPUs)}
	if len(cols) == 7 {
		cells = append(cells, a.NodeID)
	}
	price := "—"
	if s, ok := m.skuByID(a.SKU); ok {
		price = api.FormatMoney(s.PricePerGPUHourMinor*int64(a.GPUs), s.Currency)
	}
	return append(cells, cmdutil.FuzzyDuration(now.Sub(a.CreatedAt)), price)
}

// fit pads or cuts s to exactly w cells.
func fit(s string, w int, right bool) string {
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	pad := strings.Repeat(" ", max(0, w-ansi.StringWidth(s)))
	if right {
		return pad + s
	}
	return s + pad
}

func headerLine(cols []column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fit(c.title, c.width, c.right)
	}
	return strings.Join(parts, "  ")
}

// renderAllocTable renders the header and the rows on screen, width
// columns wide and h rows tall.
func (m *Model) renderAllocTable(width, h int) string {
	cols := allocColumns(width)
	var b strings.Builder
	b.WriteString(m.st.header.Render(fit("  "+headerLine(cols), width, false)))
	if !m.loaded {
		b.WriteString("\n" + m.st.dim.Render(m.loadingText()))
		return b.String()
	}
	if len(m.rows) == 0 {
		msg := "No allocations. Press c to create one."
		if m.filter != "" {
			msg = "No allocations match /" + m.filter + " (esc clears the filter)."
		}
		b.WriteString("\n" + m.st.dim.Render(msg))
		return b.String()
	}
	now := m.now()
	end := min(len(m.rows), m.offset+h)
	for r := m.offset; r < end; r++ {
		a := m.allocs[m.rows[r]]
		cells := m.allocCells(a, cols, now)
		b.WriteByte('\n')
		if r == m.cursor {
			parts := make([]string, len(cells))
			for i, c := range cells {
				parts[i] = fit(c, cols[i].width, cols[i].right)
			}
			b.WriteString(m.st.selected.Render(fit("› "+strings.Join(parts, "  "), width, false)))
			continue
		}
		b.WriteString("  ")
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			cell := fit(c, cols[i].width, cols[i].right)
			if i == 1 {
				cell = m.st.state(a.State).Render(cell)
			}
			b.WriteString(cell)
		}
	}
	return b.String()
}

func (m *Model) loadingText() string {
	if m.loadErr != nil {
		return "cannot list allocations: " + errorText(m.loadErr)
	}
	return "loading…"
}
