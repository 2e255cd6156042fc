package tui

import (
	"encoding/json"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/apps"
	"github.com/gpuaas/gpuaas/tui/detail"
	"github.com/gpuaas/gpuaas/tui/jobs"
	"github.com/gpuaas/gpuaas/tui/nodes"
	"github.com/gpuaas/gpuaas/tui/wizard"
)

// Update applies one message: a key goes to the component the mode and
// view say, an answer to the component (or the root state) it is for.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.layout()
		m.table.Clamp()
		return m, nil
	case tea.KeyMsg:
		return m, m.handleKey(msg)
	case whoamiMsg:
		if msg.err != nil {
			m.table.SetLoadErr(msg.err)
			return m, nil
		}
		m.who = msg.who
		switch {
		case m.project != "":
		case msg.who.DefaultProject != nil:
			m.project = msg.who.DefaultProject.Name
		case len(msg.who.Projects) > 0:
			m.project = msg.who.Projects[0].Name
		}
		m.jobs.SetProject(m.project)
		if m.events {
			return m, nil
		}
		return m, m.subscribe(msg.who.User.ID)
	case allocsMsg:
		m.table.SetLoadErr(msg.err)
		if msg.err == nil {
			m.table.SetAllocs(msg.allocs)
		}
		return m, nil
	case detail.LoadedMsg:
		m.pane.Update(msg)
		if msg.Err == nil {
			m.upsert(*msg.Alloc)
		}
		return m, nil
	case detail.WorkMsg:
		m.pane.Update(msg)
		return m, nil
	case jobs.LoadedMsg:
		m.jobs.Update(msg)
		return m, nil
	case jobs.LogsMsg:
		_, cmd := m.jobs.Update(msg)
		return m, cmd
	case apps.LoadedMsg:
		m.apps.Update(msg)
		return m, nil
	case apps.RanMsg:
		return m, m.ran(msg)
	case catalogMsg:
		if msg.err == nil {
			m.setCatalog(msg.skus)
		}
		return m, nil
	case projectsMsg:
		if msg.err == nil {
			m.projects = msg.projects
		}
		return m, nil
	case nodes.LoadedMsg:
		m.nodes.Update(msg)
		return m, nil
	case balanceMsg:
		m.balance, m.balanceErr = msg.balance, msg.err
		return m, nil
	case wizard.VerdictMsg:
		m.wizard.Update(msg)
		return m, nil
	case wizard.CreatedMsg:
		return m, m.created(msg)
	case releasedMsg:
		if msg.err != nil {
			m.setError(fmt.Errorf("release %s: %w", msg.id, msg.err))
			return m, nil
		}
		m.upsert(*msg.alloc)
		m.setFlash("releasing " + msg.id)
		return m, nil
	case eventsMsg:
		if msg.err != nil {
			return m, nil // the periodic refresh still runs
		}
		m.events = true
		return m, waitEvent(msg.ch)
	case eventMsg:
		return m, tea.Batch(m.applyEvent(msg.ev), waitEvent(msg.ch))
	case tickMsg:
		return m, tea.Batch(m.refreshAll(), m.tick())
	case topMsg:
		m.table.SetUtil(msg.id, msg.util, msg.ok)
		return m, nil
	case sshReadyMsg:
		if msg.err != nil {
			m.setError(fmt.Errorf("ssh %s: %w", msg.id, msg.err))
			return m, nil
		}
		id := msg.id
		return m, tea.ExecProcess(msg.cmd, func(err error) tea.Msg { return sshDoneMsg{id, err} })
	case sshDoneMsg:
		if msg.err != nil {
			m.setError(fmt.Errorf("ssh %s: %w", msg.id, msg.err))
		} else {
			m.setFlash("ssh session to " + msg.id + " ended")
		}
		return m, m.loadAllocs()
	}
	return m, nil
}

// refreshAll re-reads what is on screen.
func (m *Model) refreshAll() tea.Cmd {
	cmds := []tea.Cmd{m.loadAllocs(), m.loadBalance()}
	switch m.view {
	case viewNodes:
		cmds = append(cmds, m.nodes.Load())
	case viewJobs:
		cmds = append(cmds, m.jobs.Load())
	default:
		cmds = append(cmds, m.loadTops())
	}
	if a, ok := m.selected(); ok && m.detailOpen {
		cmds = append(cmds, m.loadPane(a.ID))
	}
	if len(m.skus) == 0 {
		cmds = append(cmds, m.loadCatalog())
	}
	return tea.Batch(cmds...)
}

// applyEvent updates the row an alloc.state event is about, and re-reads
// its timeline when its details are open (on alloc.progress too); a
// job.state or workload.state event updates its row in the jobs view and
// the detail pane as it is, with no read.
func (m *Model) applyEvent(ev api.Event) tea.Cmd {
	switch ev.Kind {
	case api.EventAllocState:
		var ch api.AllocStateChange
		if err := json.Unmarshal(ev.Data, &ch); err != nil || ch.Allocation.ID == "" {
			return m.loadAllocs()
		}
		m.upsert(ch.Allocation)
		if a, ok := m.selected(); ok && m.detailOpen && a.ID == ch.Allocation.ID {
			return m.pane.Load(a.ID)
		}
	case api.EventAllocProgress:
		// A phase of the allocation whose details are open: re-read its
		// timeline (the pane keeps the newest read).
		if a, ok := m.selected(); ok && m.detailOpen && a.ID == ev.Subject {
			return m.pane.Load(a.ID)
		}
	case api.EventNode:
		if m.view == viewNodes {
			return m.nodes.Load()
		}
	case api.EventJobState:
		var j api.Job
		if err := json.Unmarshal(ev.Data, &j); err != nil || j.ID == "" {
			return nil
		}
		m.pane.UpsertJob(j)
		m.jobs.Upsert(j)
	case api.EventWorkloadState:
		var w api.Workload
		if err := json.Unmarshal(ev.Data, &w); err != nil || w.ID == "" {
			return nil
		}
		m.pane.UpsertWorkload(w)
	case api.EventsGap:
		// Events the stream no longer held are lost for good (events
		// missed while disconnected are resent): re-read all they may
		// have changed.
		m.setFlash("some events were dropped by the event stream's retention; reloaded")
		cmds := []tea.Cmd{m.loadAllocs()}
		if a, ok := m.selected(); ok && m.detailOpen {
			cmds = append(cmds, m.loadPane(a.ID))
		}
		switch m.view {
		case viewNodes:
			cmds = append(cmds, m.nodes.Load())
		case viewJobs:
			cmds = append(cmds, m.jobs.Load())
		}
		return tea.Batch(cmds...)
	}
	return nil
}

// created handles the reply to the wizard's create: a failure stays in
// the wizard, a success closes it and selects the new allocation.
func (m *Model) created(msg wizard.CreatedMsg) tea.Cmd {
	m.wizard.Update(msg)
	if msg.Err != nil {
		return nil
	}
	m.mode = modeNormal
	m.wizard.Close()
	m.upsert(*msg.Alloc)
	m.table.Select(msg.Alloc.ID)
	state := msg.Alloc.State
	if msg.Alloc.Queued {
		state += ", queued for capacity"
	}
	m.setFlash(fmt.Sprintf("created %s (%s)", msg.Alloc.ID, state))
	return m.loadAllocs()
}
