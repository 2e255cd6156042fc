package tui

import (
	"errors"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/apps"
	"github.com/gpuaas/gpuaas/tui/common"
)

// openDetail reads the selection's details when the pane is open.
func (m *Model) openDetail() tea.Cmd {
	a, ok := m.selected()
	if !m.detailOpen || !ok {
		return nil
	}
	m.pane.Show(a.ID)
	return m.loadPane(a.ID)
}

// loadPane reads what the detail pane shows of id: its details and
// timeline, its jobs and workloads.
func (m *Model) loadPane(id string) tea.Cmd {
	return tea.Batch(m.pane.Load(id), m.pane.LoadWork(id))
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

// showJobs switches to the jobs view and lists the project's jobs.
func (m *Model) showJobs() tea.Cmd {
	m.view = viewJobs
	m.setDetailOpen(false)
	return m.jobs.Load()
}

// openApps opens the app picker for id (default: the selection), which
// must be active, listing the apps its project may run; controld refuses
// what else it cannot run on, and the status bar says why.
func (m *Model) openApps(id string) tea.Cmd {
	project := ""
	if id == "" {
		a, ok := m.selected()
		if !ok {
			m.setError(errors.New("no allocation selected"))
			return nil
		}
		if a.State != api.AllocActive {
			m.setError(fmt.Errorf("%s is %s; an app runs on an active allocation", a.ID, a.State))
			return nil
		}
		id = a.ID
	}
	for _, a := range m.table.Allocs() {
		if a.ID == id {
			project = a.ProjectID
		}
	}
	m.view = viewAllocs
	m.mode = modeApps
	return m.apps.Open(id, project)
}

// ran handles app.run's answer: an error in the status bar, a workload
// in the detail pane (events keep it current from there).
func (m *Model) ran(msg apps.RanMsg) tea.Cmd {
	if msg.Err != nil {
		m.setError(fmt.Errorf("app run %s on %s: %w", common.Text(msg.App), msg.AllocID, msg.Err))
		return nil
	}
	w := msg.Workload
	m.setFlash(fmt.Sprintf("workload %s (%s) on %s: %s", w.ID, common.Text(w.Name), w.AllocationID, w.State))
	m.pane.UpsertWorkload(*w)
	if a, ok := m.selected(); ok && a.ID == w.AllocationID {
		if !m.detailOpen {
			m.setDetailOpen(true)
			return m.openDetail()
		}
	}
	return nil
}
