// Package apps is the dashboard's app picker (a): the published apps a
// workload of the allocation's project may run now, as `gpuaas app list`
// lists them, to run one on the selected allocation through app.run, the
// endpoint of `gpuaas app run NAME --alloc ID` (docs/apps.md, "Publishing
// apps"; docs/decisions/0060-tui-runs-published-apps.md).
package apps

import (
	"context"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/common"
)

// Runner is what the picker asks of controld.
type Runner interface {
	ListApps(ctx context.Context, project string) ([]api.App, error)
	RunApp(ctx context.Context, req api.AppRunRequest) (*api.Workload, error)
}

// LoadedMsg is the answer to the catalog read Open starts.
type LoadedMsg struct {
	AllocID string
	Apps    []api.App
	Err     error
}

// RanMsg is the answer to Run: the workload created, or why not.
type RanMsg struct {
	AllocID, App string
	Workload     *api.Workload
	Err          error
}

// Model is the picker: a list of apps and a cursor, for one allocation.
type Model struct {
	common.Common
	ctx     context.Context
	b       Runner
	allocID string
	apps    []api.App
	cursor  int
	loaded  bool
	err     error
}

var _ common.Component = (*Model)(nil)

// New returns a closed picker reading from b within ctx.
func New(ctx context.Context, c common.Common, b Runner) *Model {
	return &Model{Common: c, ctx: ctx, b: b}
}

// Open starts picking an app to run on allocID, of project (its id; ""
// when unknown: the caller's default), and reads the apps that project
// may run.
func (m *Model) Open(allocID, project string) tea.Cmd {
	m.allocID, m.apps, m.cursor, m.loaded, m.err = allocID, nil, 0, false, nil
	b, ctx := m.b, m.ctx
	return func() tea.Msg {
		as, err := backend.Call(ctx, func(ctx context.Context) ([]api.App, error) { return b.ListApps(ctx, project) })
		return LoadedMsg{AllocID: allocID, Apps: as, Err: err}
	}
}

// AllocID is the allocation the picker runs an app on.
func (m *Model) AllocID() string { return m.allocID }

// Update takes LoadedMsg and the cursor keys.
func (m *Model) Update(msg tea.Msg) (common.Component, tea.Cmd) {
	switch msg := msg.(type) {
	case LoadedMsg:
		if msg.AllocID != m.allocID {
			return m, nil // a late answer for a picker opened on another allocation
		}
		m.loaded, m.err, m.apps = true, msg.Err, msg.Apps
		m.cursor = 0
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, m.Keys.Up):
			m.cursor = max(0, m.cursor-1)
		case key.Matches(msg, m.Keys.Down):
			m.cursor = max(0, min(len(m.apps)-1, m.cursor+1))
		}
	}
	return m, nil
}

// Selected is the app under the cursor.
func (m *Model) Selected() (api.App, bool) {
	if m.cursor < 0 || m.cursor >= len(m.apps) {
		return api.App{}, false
	}
	return m.apps[m.cursor], true
}

// Run runs app on the picker's allocation as `gpuaas app run NAME
// --alloc ID` does: app.run with nothing but the app and the allocation,
// so controld fills the rest from the stored manifest (command, env,
// GPUs, shared memory, readiness). The app goes by its id, so that the
// one chosen runs even when the project has an app of the platform's
// app's name (docs/decisions/0060-tui-runs-published-apps.md).
func (m *Model) Run(app api.App) tea.Cmd {
	b, ctx, allocID := m.b, m.ctx, m.allocID
	return func() tea.Msg {
		w, err := backend.Call(ctx, func(ctx context.Context) (*api.Workload, error) {
			return b.RunApp(ctx, api.AppRunRequest{Image: app.ID, AllocationID: allocID})
		})
		return RanMsg{AllocID: allocID, App: app.Name, Workload: w, Err: err}
	}
}

// ShortHelp is the picker's key hints.
func (m *Model) ShortHelp() []key.Binding {
	return []key.Binding{m.Keys.Up, m.Keys.Down,
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "run")), key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel"))}
}

// View renders the picker.
func (m *Model) View() string {
	st := m.Styles
	title := "Run an app on " + m.allocID
	out := []string{st.PaneTitle.Render(title) + st.Dim.Render(common.Fit(" · the published apps you can run (gpuaas app list)", max(0, m.Width-len(title)), false))}
	switch {
	case !m.loaded:
		out = append(out, st.Dim.Render("loading the apps…"))
	case m.err != nil:
		out = append(out, st.Bad.Render(common.ErrorText(m.err)))
	case len(m.apps) == 0:
		out = append(out, st.Dim.Render("No apps to run here yet. Publish one: `gpuaas app publish -f app.yaml` (a project's owners;"),
			st.Dim.Render("--platform: operators), then `gpuaas app promote NAME` (docs/apps.md, \"Publishing apps\")."))
	default:
		out = append(out, st.Dim.Render(common.Fit("  "+row("NAME", "SCOPE", "IMAGE", "TRUST", "PORTS"), m.Width, false)))
	}
	for i, app := range m.apps {
		scope := app.Scope
		if app.Project != "" {
			scope = app.Project
		}
		line := row(common.Text(app.Name), common.Text(scope), common.Text(app.Image), common.Text(app.Trust), common.PortsText(app.Manifest.Ports))
		if i == m.cursor {
			out = append(out, st.Selected.Render(common.Fit("› "+line, m.Width, false)))
			continue
		}
		out = append(out, common.Fit("  "+line, m.Width, false))
	}
	if head := 2; len(m.apps) > 0 && len(out) > m.Height && m.Height > head {
		// Keep the title, the header and the cursor's row on screen.
		rows := m.Height - head
		start := max(head, min(m.cursor+head+1-rows, len(out)-rows))
		out = append(out[:head], out[start:start+rows]...)
	}
	return strings.Join(out, "\n")
}

// row lays out the picker's columns: name, scope, image, trust, ports.
func row(name, scope, image, trust, ports string) string {
	return common.Fit(name, 16, false) + "  " + common.Fit(scope, 10, false) + "  " + common.Fit(image, 14, false) + "  " +
		common.Fit(trust, 8, false) + "  " + ports
}
