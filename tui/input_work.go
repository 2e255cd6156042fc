package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/tui/common"
)

// keyJobs handles the keys of the jobs view: moving, enter to open a
// job's log, esc to close it (or, with none open, back to the
// allocations).
func (m *Model) keyJobs(k tea.KeyMsg) (tea.Cmd, bool) {
	keys := m.common.Keys
	switch {
	case key.Matches(k, keys.Back) && !m.jobs.LogsOpen():
		m.view = viewAllocs
	case key.Matches(k, keys.Up, keys.Down, keys.PageUp, keys.PageDown, keys.Top, keys.Bottom, keys.Detail, keys.Back):
		m.flash = ""
		_, cmd := m.jobs.Update(k)
		return cmd, true
	default:
		return nil, false
	}
	return nil, true
}

// keyApps handles the app picker: moving, enter to choose (then y/n),
// esc to close it.
func (m *Model) keyApps(k tea.KeyMsg) tea.Cmd {
	keys := m.common.Keys
	switch {
	case k.Type == tea.KeyCtrlC:
		return tea.Quit
	case key.Matches(k, keys.Back), k.String() == "q":
		m.mode = modeNormal
		m.flash = ""
	case key.Matches(k, keys.Detail):
		app, ok := m.apps.Selected()
		if !ok {
			return nil
		}
		m.flash = ""
		m.appChoice = app
		m.mode = modeAppConfirm
	default:
		m.apps.Update(k)
	}
	return nil
}

// keyAppConfirm answers "Run APP on ALLOC? (y/n)": y runs it through
// app.run, n goes back to the picker.
func (m *Model) keyAppConfirm(k tea.KeyMsg) tea.Cmd {
	switch k.String() {
	case "y", "Y":
		m.mode = modeNormal
		m.setFlash("starting " + common.Text(m.appChoice.Name) + " on " + m.apps.AllocID() + "…")
		return m.apps.Run(m.appChoice)
	case "n", "N", "esc", "q":
		m.mode = modeApps
	case "ctrl+c":
		return tea.Quit
	}
	return nil // anything else: the question stays
}
