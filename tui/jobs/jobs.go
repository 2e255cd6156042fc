// Package jobs is the dashboard's jobs view (J): the project's jobs,
// newest first, kept current by job.state events, and the log of the
// job under the cursor (enter), followed while it runs as `gpuaas job
// logs -f` follows it.
package jobs

import (
	"context"
	"slices"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/common"
)

// Lister is what the view asks of controld.
type Lister interface {
	ListJobs(ctx context.Context, req api.JobListRequest) ([]api.Job, error)
	JobLogs(ctx context.Context, req api.JobLogsRequest) (*api.JobLogsResponse, error)
}

// LoadedMsg is the answer to Load.
type LoadedMsg struct {
	Jobs []api.Job
	Err  error
}

// Model is the jobs view. Its height is the rows on screen, the header
// included.
type Model struct {
	common.Common
	ctx     context.Context
	b       Lister
	project string

	jobs    []api.Job // newest first
	cursor  int
	offset  int
	loaded  bool
	loadErr error

	logs logView // the log of one job, when open
}

var _ common.Component = (*Model)(nil)

// New returns an empty jobs view reading from b within ctx.
func New(ctx context.Context, c common.Common, b Lister) *Model {
	return &Model{Common: c, ctx: ctx, b: b}
}

// SetProject sets the project whose jobs Load lists ("" the caller's).
func (m *Model) SetProject(p string) { m.project = p }

// Load lists the project's jobs.
func (m *Model) Load() tea.Cmd {
	b, ctx, project := m.b, m.ctx, m.project
	return func() tea.Msg {
		js, err := backend.Call(ctx, func(ctx context.Context) ([]api.Job, error) {
			return b.ListJobs(ctx, api.JobListRequest{Project: project})
		})
		return LoadedMsg{js, err}
	}
}

// Update takes LoadedMsg, LogsMsg and the keys of the view: moving the
// cursor, enter to open the selected job's log, esc to close it.
func (m *Model) Update(msg tea.Msg) (common.Component, tea.Cmd) {
	switch msg := msg.(type) {
	case LoadedMsg:
		m.loadErr = msg.Err
		if msg.Err == nil {
			id := m.SelectedID()
			m.jobs, m.loaded = msg.Jobs, true
			m.selectID(id)
		}
	case LogsMsg:
		return m, m.logs.update(m, msg)
	case tea.KeyMsg:
		return m, m.key(msg)
	}
	return m, nil
}

func (m *Model) key(k tea.KeyMsg) tea.Cmd {
	keys := m.Keys
	if m.logs.open {
		if key.Matches(k, keys.Back) {
			m.logs.close()
		}
		return nil
	}
	switch {
	case key.Matches(k, keys.Up):
		m.move(-1)
	case key.Matches(k, keys.Down):
		m.move(1)
	case key.Matches(k, keys.PageUp):
		m.move(-m.rowsOnScreen())
	case key.Matches(k, keys.PageDown):
		m.move(m.rowsOnScreen())
	case key.Matches(k, keys.Top):
		m.move(-len(m.jobs))
	case key.Matches(k, keys.Bottom):
		m.move(len(m.jobs))
	case key.Matches(k, keys.Detail):
		if j, ok := m.Selected(); ok {
			return m.logs.openJob(m, j)
		}
	}
	return nil
}

// LogsOpen reports whether a job's log is on screen (esc closes it).
func (m *Model) LogsOpen() bool { return m.logs.open }

// ShortHelp is the jobs view's key hints.
func (m *Model) ShortHelp() []key.Binding {
	k := m.Keys
	if m.logs.open {
		return []key.Binding{k.Back, k.Help, k.Quit}
	}
	return []key.Binding{key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "log")), k.Back, k.Jobs, k.Refresh, k.Help, k.Quit}
}

// Upsert takes a job from a job.state event: it replaces the row of the
// same id, or comes first when new (a job of another project, which the
// view does not list, is left out).
func (m *Model) Upsert(j api.Job) {
	if !m.loaded {
		return
	}
	id := m.SelectedID()
	if i := slices.IndexFunc(m.jobs, func(o api.Job) bool { return o.ID == j.ID }); i >= 0 {
		m.jobs[i] = j
	} else if len(m.jobs) == 0 || m.jobs[0].ProjectID == j.ProjectID {
		m.jobs = append([]api.Job{j}, m.jobs...)
	}
	m.selectID(id)
	m.logs.jobChanged(j)
}

// Jobs are the jobs listed, newest first.
func (m *Model) Jobs() []api.Job { return m.jobs }

// Selected returns the job under the cursor.
func (m *Model) Selected() (api.Job, bool) {
	if m.cursor < 0 || m.cursor >= len(m.jobs) {
		return api.Job{}, false
	}
	return m.jobs[m.cursor], true
}

// SelectedID is the selected job's id, "" when none.
func (m *Model) SelectedID() string {
	j, _ := m.Selected()
	return j.ID
}

func (m *Model) selectID(id string) {
	if i := slices.IndexFunc(m.jobs, func(j api.Job) bool { return j.ID == id }); i >= 0 {
		m.cursor = i
	}
	m.clamp()
}

func (m *Model) move(d int) {
	m.cursor += d
	m.clamp()
}

// rowsOnScreen is how many job rows fit under the header.
func (m *Model) rowsOnScreen() int { return max(1, m.Height-1) }

func (m *Model) clamp() {
	m.cursor = max(0, min(m.cursor, len(m.jobs)-1))
	h := m.rowsOnScreen()
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+h {
		m.offset = m.cursor - h + 1
	}
	m.offset = max(0, min(m.offset, len(m.jobs)-h))
}
