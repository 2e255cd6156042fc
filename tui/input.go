package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/tui/cmdline"
)

// handleKey sends a key where the mode says: the input line, the release
// question, the wizard, the help screen, or the view on screen.
func (m *Model) handleKey(k tea.KeyMsg) tea.Cmd {
	switch m.mode {
	case modeFilter:
		return m.keyFilter(k)
	case modeCommand:
		return m.keyCommand(k)
	case modeConfirm:
		return m.keyConfirm(k)
	case modeWizard:
		return m.keyWizard(k)
	case modeApps:
		return m.keyApps(k)
	case modeAppConfirm:
		return m.keyAppConfirm(k)
	case modeHelp:
		if k.Type == tea.KeyCtrlC {
			return tea.Quit
		}
		m.mode = modeNormal // any key closes help
		return nil
	}
	switch m.view {
	case viewNodes:
		if cmd, ok := m.keyNodes(k); ok {
			return cmd
		}
	case viewJobs:
		if cmd, ok := m.keyJobs(k); ok {
			return cmd
		}
	}
	return m.keyNormal(k)
}

func (m *Model) keyNormal(k tea.KeyMsg) tea.Cmd {
	keys := m.common.Keys
	if !key.Matches(k, keys.Help, keys.Back) {
		m.flash = ""
	}
	switch {
	case key.Matches(k, keys.Quit):
		return tea.Quit
	case key.Matches(k, keys.Help):
		m.mode = modeHelp
	case key.Matches(k, keys.Filter):
		m.view = viewAllocs
		m.mode = modeFilter
		m.input.Reset("/", m.table.Filter())
	case key.Matches(k, keys.Command):
		m.mode = modeCommand
		m.input.Reset(":", "")
	case key.Matches(k, keys.Nodes):
		if m.view == viewNodes {
			m.view = viewAllocs
			return nil
		}
		return m.showNodes()
	case key.Matches(k, keys.Refresh):
		return m.refreshAll()
	case key.Matches(k, keys.Jobs):
		if m.view == viewJobs {
			m.view = viewAllocs
			return nil
		}
		return m.showJobs()
	case m.view != viewAllocs:
		return nil
	case key.Matches(k, keys.Up, keys.Down, keys.PageUp, keys.PageDown, keys.Top, keys.Bottom):
		before := m.table.Cursor()
		m.table.Update(k)
		if m.table.Cursor() == before {
			return nil
		}
		return m.openDetail() // the details follow the selection
	case key.Matches(k, keys.Detail):
		m.setDetailOpen(!m.detailOpen)
		return m.openDetail()
	case key.Matches(k, keys.Back):
		if m.table.Filter() != "" && !m.detailOpen {
			m.table.SetFilter("")
		}
		m.setDetailOpen(false)
	case key.Matches(k, keys.All):
		m.table.SetShowAll(!m.table.ShowAll())
	case key.Matches(k, keys.Create):
		return m.openWizard()
	case key.Matches(k, keys.Release):
		return m.askRelease("")
	case key.Matches(k, keys.SSH):
		return m.startSSH("")
	case key.Matches(k, keys.App):
		return m.openApps("")
	}
	return nil
}

// keyNodes handles the keys that differ in the nodes view.
func (m *Model) keyNodes(k tea.KeyMsg) (tea.Cmd, bool) {
	keys := m.common.Keys
	switch {
	case key.Matches(k, keys.Up, keys.Down):
		m.nodes.Update(k)
	case key.Matches(k, keys.Back):
		m.view = viewAllocs
	default:
		return nil, false
	}
	return nil, true
}

func (m *Model) keyWizard(k tea.KeyMsg) tea.Cmd {
	_, cmd := m.wizard.Update(k)
	if !m.wizard.IsOpen() { // esc on its first page
		m.mode = modeNormal
	}
	return cmd
}

func (m *Model) keyFilter(k tea.KeyMsg) tea.Cmd {
	m.input.Update(k)
	switch m.input.Status() {
	case cmdline.Done:
		m.mode = modeNormal
	case cmdline.Cancelled:
		m.mode = modeNormal
		m.table.SetFilter("")
	default:
		m.table.SetFilter(m.input.Value()) // filter as you type
	}
	return nil
}

func (m *Model) keyCommand(k tea.KeyMsg) tea.Cmd {
	m.input.Update(k)
	switch m.input.Status() {
	case cmdline.Done:
		m.mode = modeNormal
		return m.runCommand(m.input.Value())
	case cmdline.Cancelled:
		m.mode = modeNormal
	}
	return nil
}

func (m *Model) keyConfirm(k tea.KeyMsg) tea.Cmd {
	switch k.String() {
	case "y", "Y":
		id := m.confirmID
		m.mode, m.confirmID = modeNormal, ""
		m.setFlash("releasing " + id + "…")
		return m.releaseAlloc(id)
	case "n", "N", "esc", "q", "ctrl+c":
		m.mode, m.confirmID = modeNormal, ""
		m.setFlash("release cancelled")
	}
	return nil // anything else: the question stays
}
