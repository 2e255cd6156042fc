// Package allocs is the dashboard's allocations table: the caller's
// allocations, filtered and scrolled, with a cursor on the selected one.
package allocs

import (
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/common"
)

// Model is the allocations table. Its height is the number of rows on
// screen (the header not counted).
type Model struct {
	common.Common
	recent time.Duration
	skus   []api.SKU

	allocs  []api.Allocation // newest first, as controld lists them
	rows    []int            // indexes into allocs shown: filtered, in order
	cursor  int              // index into rows
	offset  int              // first row on screen
	showAll bool
	filter  string
	loaded  bool
	loadErr error
	// util is the mean GPU utilisation of active allocations (util.go).
	util map[string]float64
}

var _ common.Component = (*Model)(nil)

// New returns an empty table that hides allocations finished longer than
// recent ago until all are shown.
func New(c common.Common, recent time.Duration) *Model {
	return &Model{Common: c, recent: recent}
}

// Update moves the cursor on the navigation keys.
func (m *Model) Update(msg tea.Msg) (common.Component, tea.Cmd) {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return m, nil
	}
	keys := m.Keys
	switch {
	case key.Matches(k, keys.Up):
		m.MoveCursor(-1)
	case key.Matches(k, keys.Down):
		m.MoveCursor(1)
	case key.Matches(k, keys.PageUp):
		m.MoveCursor(-m.Height)
	case key.Matches(k, keys.PageDown):
		m.MoveCursor(m.Height)
	case key.Matches(k, keys.Top):
		m.MoveCursor(-len(m.rows))
	case key.Matches(k, keys.Bottom):
		m.MoveCursor(len(m.rows))
	}
	return m, nil
}

// SetSize gives the table its width and the number of rows on screen. It
// leaves the scroll where it is until the next change to the list or the
// cursor (or Clamp).
func (m *Model) SetSize(width, height int) { m.Common.SetSize(width, height) }

// ShortHelp is the allocations view's key hints.
func (m *Model) ShortHelp() []key.Binding { return m.Keys.Short() }

// SetCatalog gives the table the SKUs, for the price column.
func (m *Model) SetCatalog(skus []api.SKU) { m.skus = skus }

// SetLoadErr records why the list could not be read; it is shown until
// a list arrives.
func (m *Model) SetLoadErr(err error) { m.loadErr = err }

// SetAllocs replaces the list with what controld listed, keeping the
// selection on the same allocation.
func (m *Model) SetAllocs(as []api.Allocation) {
	id := m.SelectedID()
	m.allocs = as
	m.loaded = true
	m.rebuildRowsKeeping(id)
}

// Upsert puts one allocation in the list: a newer version replaces the
// row, an older one (a late event) is ignored, a new one goes in by
// creation time, newest first. It returns a as stored (a replacement
// without a timeline keeps the row's), and false when a was ignored.
func (m *Model) Upsert(a api.Allocation) (api.Allocation, bool) {
	id := m.SelectedID()
	if i := slices.IndexFunc(m.allocs, func(x api.Allocation) bool { return x.ID == a.ID }); i >= 0 {
		if a.Version < m.allocs[i].Version {
			return a, false
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
	m.rebuildRowsKeeping(id)
	return a, true
}

// Allocs is every allocation listed, shown or not, newest first.
func (m *Model) Allocs() []api.Allocation { return m.allocs }

// Shown is how many rows pass the filter.
func (m *Model) Shown() int { return len(m.rows) }

// Cursor is the selected row's index among the rows shown.
func (m *Model) Cursor() int { return m.cursor }

// Offset is the index of the first row on screen.
func (m *Model) Offset() int { return m.offset }

// Selected returns the allocation under the cursor.
func (m *Model) Selected() (api.Allocation, bool) {
	if m.cursor < 0 || m.cursor >= len(m.rows) {
		return api.Allocation{}, false
	}
	return m.allocs[m.rows[m.cursor]], true
}

// SelectedID is the selected allocation's ID, "" when none.
func (m *Model) SelectedID() string {
	a, _ := m.Selected()
	return a.ID
}

// Filter is the text rows are filtered by.
func (m *Model) Filter() string { return m.filter }

// SetFilter shows only the rows with f in a column (any case).
func (m *Model) SetFilter(f string) {
	m.filter = f
	m.rebuildRows()
}

// ShowAll reports whether allocations finished long ago are shown.
func (m *Model) ShowAll() bool { return m.showAll }

// SetShowAll shows every allocation (true) or only live and recently
// finished ones.
func (m *Model) SetShowAll(all bool) {
	m.showAll = all
	m.rebuildRows()
}

func (m *Model) rebuildRows() { m.rebuildRowsKeeping(m.SelectedID()) }

// rebuildRowsKeeping recomputes the visible rows (filter, recent) and puts
// the cursor back on id when it is still shown.
func (m *Model) rebuildRowsKeeping(id string) {
	m.rows = m.rows[:0]
	now := m.Now()
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
		m.Select(id)
	}
	m.Clamp()
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

// Select moves the cursor to id if it is shown.
func (m *Model) Select(id string) {
	for r, i := range m.rows {
		if m.allocs[i].ID == id {
			m.cursor = r
			m.Clamp()
			return
		}
	}
}

// MoveCursor moves the selection by d rows and reports whether it moved.
func (m *Model) MoveCursor(d int) bool {
	before := m.cursor
	m.cursor += d
	m.Clamp()
	return m.cursor != before
}

// Clamp keeps the cursor in range and on screen.
func (m *Model) Clamp() {
	m.cursor = max(0, min(m.cursor, len(m.rows)-1))
	h := max(1, m.Height)
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+h {
		m.offset = m.cursor - h + 1
	}
	m.offset = max(0, min(m.offset, len(m.rows)-h))
}
