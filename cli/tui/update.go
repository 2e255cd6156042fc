package tui

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Update applies one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.clampScroll()
		return m, nil
	case tea.KeyMsg:
		return m, m.handleKey(msg)
	case whoamiMsg:
		if msg.err != nil {
			m.loadErr = msg.err
			return m, nil
		}
		m.who = msg.who
		if m.project == "" && len(msg.who.Projects) > 0 {
			m.project = msg.who.Projects[0].Name
		}
		if m.events {
			return m, nil
		}
		return m, m.subscribe(msg.who.User.ID)
	case allocsMsg:
		m.loadErr = msg.err
		if msg.err == nil {
			m.setAllocs(msg.allocs)
		}
		return m, nil
	case detailMsg:
		m.detailErr = msg.err
		if msg.err == nil {
			m.detail = msg.alloc
			m.upsert(*msg.alloc)
		}
		return m, nil
	case catalogMsg:
		if msg.err == nil {
			m.skus = msg.skus
		}
		return m, nil
	case projectsMsg:
		if msg.err == nil {
			m.projects = msg.projects
		}
		return m, nil
	case nodesMsg:
		m.nodesErr = msg.err
		if msg.err == nil {
			m.nodes = msg.nodes
			m.nodeCursor = min(m.nodeCursor, max(0, len(m.nodes)-1))
		}
		return m, nil
	case balanceMsg:
		m.balance, m.balanceErr = msg.balance, msg.err
		return m, nil
	case verdictMsg:
		m.wiz.setVerdict(msg)
		return m, nil
	case createdMsg:
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
	if m.view == viewNodes {
		cmds = append(cmds, m.loadNodes())
	}
	if a, ok := m.selected(); ok && m.detailOpen {
		cmds = append(cmds, m.loadDetail(a.ID))
	}
	if len(m.skus) == 0 {
		cmds = append(cmds, m.loadCatalog())
	}
	return tea.Batch(cmds...)
}

// applyEvent updates the row an alloc.state event is about, and re-reads
// its timeline when its details are open.
func (m *Model) applyEvent(ev api.Event) tea.Cmd {
	switch ev.Kind {
	case api.EventAllocState:
		var ch api.AllocStateChange
		if err := json.Unmarshal(ev.Data, &ch); err != nil || ch.Allocation.ID == "" {
			return m.loadAllocs()
		}
		m.upsert(ch.Allocation)
		if a, ok := m.selected(); ok && m.detailOpen && a.ID == ch.Allocation.ID {
			return m.loadDetail(a.ID)
		}
	case api.EventNode:
		if m.view == viewNodes {
			return m.loadNodes()
		}
	}
	return nil
}

// created handles the reply to the wizard's create.
func (m *Model) created(msg createdMsg) tea.Cmd {
	m.wiz.busy = false
	if msg.err != nil {
		m.wiz.err = msg.err
		return nil
	}
	m.mode = modeNormal
	m.wiz = wizard{}
	m.upsert(*msg.alloc)
	m.selectID(msg.alloc.ID)
	state := msg.alloc.State
	if msg.alloc.Queued {
		state += ", queued for capacity"
	}
	m.setFlash(fmt.Sprintf("created %s (%s)", msg.alloc.ID, state))
	return m.loadAllocs()
}

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
	case modeHelp:
		if k.Type == tea.KeyCtrlC {
			return tea.Quit
		}
		m.mode = modeNormal // any key closes help
		return nil
	}
	if m.view == viewNodes {
		if cmd, ok := m.keyNodes(k); ok {
			return cmd
		}
	}
	return m.keyNormal(k)
}

func (m *Model) keyNormal(k tea.KeyMsg) tea.Cmd {
	keys := m.keys
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
		m.input.reset("/", m.filter)
	case key.Matches(k, keys.Command):
		m.mode = modeCommand
		m.input.reset(":", "")
	case key.Matches(k, keys.Nodes):
		if m.view == viewNodes {
			m.view = viewAllocs
			return nil
		}
		return m.showNodes()
	case key.Matches(k, keys.Refresh):
		return m.refreshAll()
	case m.view != viewAllocs:
		return nil
	case key.Matches(k, keys.Up):
		return m.moveCursor(-1)
	case key.Matches(k, keys.Down):
		return m.moveCursor(1)
	case key.Matches(k, keys.PageUp):
		return m.moveCursor(-m.tableHeight())
	case key.Matches(k, keys.PageDown):
		return m.moveCursor(m.tableHeight())
	case key.Matches(k, keys.Top):
		return m.moveCursor(-len(m.rows))
	case key.Matches(k, keys.Bottom):
		return m.moveCursor(len(m.rows))
	case key.Matches(k, keys.Detail):
		m.detailOpen = !m.detailOpen
		return m.openDetail()
	case key.Matches(k, keys.Back):
		if m.filter != "" && !m.detailOpen {
			m.setFilter("")
		}
		m.detailOpen = false
	case key.Matches(k, keys.All):
		m.showAll = !m.showAll
		m.rebuildRows()
	case key.Matches(k, keys.Create):
		return m.openWizard()
	case key.Matches(k, keys.Release):
		return m.askRelease("")
	case key.Matches(k, keys.SSH):
		return m.startSSH("")
	}
	return nil
}

func (m *Model) openDetail() tea.Cmd {
	a, ok := m.selected()
	if !m.detailOpen || !ok {
		return nil
	}
	if m.detail == nil || m.detail.ID != a.ID {
		m.detail, m.detailErr = nil, nil
	}
	return m.loadDetail(a.ID)
}

func (m *Model) keyFilter(k tea.KeyMsg) tea.Cmd {
	switch m.input.handle(k) {
	case editDone:
		m.mode = modeNormal
	case editCancelled:
		m.mode = modeNormal
		m.setFilter("")
	default:
		m.setFilter(m.input.String()) // filter as you type
	}
	return nil
}

func (m *Model) keyCommand(k tea.KeyMsg) tea.Cmd {
	switch m.input.handle(k) {
	case editDone:
		m.mode = modeNormal
		return m.runCommand(m.input.String())
	case editCancelled:
		m.mode = modeNormal
	}
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
		m.setFlash(fmt.Sprintf("from your own terminal: gpuaas ssh %s (or ssh %s@<gateway>)", id, id))
		return nil
	}
	fn, ctx := m.sshFn, m.ctx
	m.setFlash("connecting to " + id + "…")
	return func() tea.Msg {
		cmd, err := fn(ctx, id)
		return sshReadyMsg{id, cmd, err}
	}
}
