package tui

import (
	"errors"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
)

// openDetail reads the selection's details when the pane is open.
func (m *Model) openDetail() tea.Cmd {
	a, ok := m.selected()
	if !m.detailOpen || !ok {
		return nil
	}
	m.pane.Show(a.ID)
	return m.pane.Load(a.ID)
}

// showNodes switches to the nodes view, for operators.
func (m *Model) showNodes() tea.Cmd {
	if !m.operator() {
		role := "not signed in yet"
		if m.who != nil {
			role = "role " + m.who.User.Role
		}
		m.setError(fmt.Errorf("the nodes view is for operators (%s)", role))
		return nil
	}
	m.view = viewNodes
	m.setDetailOpen(false)
	return m.nodes.Load()
}

// openWizard starts the create wizard on its SKU page.
func (m *Model) openWizard() tea.Cmd {
	if len(m.skus) == 0 {
		m.setError(errors.New("the catalog is not loaded yet (or empty); try again in a moment"))
		return m.loadCatalog()
	}
	var projects []string
	for _, p := range m.projects {
		projects = append(projects, p.Name)
	}
	m.wizard.Open(projects, m.project)
	m.view = viewAllocs
	m.mode = modeWizard
	return nil
}

// askRelease asks to confirm releasing id (default: the selection).
func (m *Model) askRelease(id string) tea.Cmd {
	if id == "" {
		a, ok := m.selected()
		if !ok {
			m.setError(errors.New("no allocation selected"))
			return nil
		}
		if a.State == api.AllocReleased || a.State == api.AllocReleasing {
			m.setError(fmt.Errorf("%s is already %s", a.ID, a.State))
			return nil
		}
		id = a.ID
	}
	m.view = viewAllocs
	m.confirmID = id
	m.mode = modeConfirm
	return nil
}

// startSSH suspends the dashboard for an ssh session to id (default: the
// selection).
func (m *Model) startSSH(id string) tea.Cmd {
	if id == "" {
		a, ok := m.selected()
		if !ok {
			m.setError(errors.New("no allocation selected"))
			return nil
		}
		if a.State != api.AllocActive {
			m.setError(fmt.Errorf("%s is %s; ssh needs it active", a.ID, a.State))
			return nil
		}
		id = a.ID
	}
	if m.sshFn == nil {
		m.setFlash("from your own terminal: " + m.sshLine(id))
		return nil
	}
	fn, ctx := m.sshFn, m.ctx
	m.setFlash("connecting to " + id + "…")
	return func() tea.Msg {
		cmd, err := fn(ctx, id)
		return sshReadyMsg{id, cmd, err}
	}
}
