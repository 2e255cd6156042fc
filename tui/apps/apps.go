// Package apps is the dashboard's app picker (a): the catalog's images a
// workload may run now, as `gpuaas app list` lists them, to run one on
// the selected allocation through app.run, the endpoint of `gpuaas app
// run` (docs/apps.md).
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
	ListApps(ctx context.Context) ([]api.Image, error)
	RunApp(ctx context.Context, req api.AppRunRequest) (*api.Workload, error)
}

// LoadedMsg is the answer to the catalog read Open starts.
type LoadedMsg struct {
	Apps []api.Image
	Err  error
}

// RanMsg is the answer to Run: the workload created, or why not.
type RanMsg struct {
	AllocID, Image string
	Workload       *api.Workload
	Err            error
}

// Model is the picker: a list of images and a cursor, for one
// allocation.
type Model struct {
	common.Common
	ctx     context.Context
	b       Runner
	allocID string
	apps    []api.Image
	cursor  int
	loaded  bool
	err     error
}

var _ common.Component = (*Model)(nil)

// New returns a closed picker reading from b within ctx.
func New(ctx context.Context, c common.Common, b Runner) *Model {
	return &Model{Common: c, ctx: ctx, b: b}
}

// Open starts picking an app to run on allocID and reads the catalog.
func (m *Model) Open(allocID string) tea.Cmd {
	m.allocID, m.apps, m.cursor, m.loaded, m.err = allocID, nil, 0, false, nil
	b, ctx := m.b, m.ctx
	return func() tea.Msg {
		as, err := backend.Call(ctx, b.ListApps)
		return LoadedMsg{as, err}
	}
}

// AllocID is the allocation the picker runs an app on.
func (m *Model) AllocID() string { return m.allocID }

// Update takes LoadedMsg and the cursor keys.
func (m *Model) Update(msg tea.Msg) (common.Component, tea.Cmd) {
	switch msg := msg.(type) {
	case LoadedMsg:
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

// Selected is the image under the cursor.
func (m *Model) Selected() (api.Image, bool) {
	if m.cursor < 0 || m.cursor >= len(m.apps) {
		return api.Image{}, false
	}
	return m.apps[m.cursor], true
}

// Run runs image on the picker's allocation.
func (m *Model) Run(image string) tea.Cmd {
	b, ctx, allocID := m.b, m.ctx, m.allocID
	return func() tea.Msg {
		w, err := backend.Call(ctx, func(ctx context.Context) (*api.Workload, error) {
			return b.RunApp(ctx, api.AppRunRequest{Image: image, AllocationID: allocID})
		})
		return RanMsg{AllocID: allocID, Image: image, Workload: w, Err: err}
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
	out := []string{st.PaneTitle.Render("Run an app on "+m.allocID) + st.Dim.Render(" · the catalog's promoted, verified images")}
	switch {
	case !m.loaded:
		out = append(out, st.Dim.Render("loading the catalog…"))
	case m.err != nil:
		out = append(out, st.Bad.Render(common.ErrorText(m.err)))
	case len(m.apps) == 0:
		out = append(out, st.Dim.Render("No apps: an operator publishes, verifies and promotes images (`gpuaas image list`)."))
	}
	for i, img := range m.apps {
		scope := img.Scope
		if img.Project != "" {
			scope = img.Project
		}
		line := common.Fit(common.Text(img.Name), 16, false) + "  " + common.Fit(common.Text(scope), 10, false) + "  " + common.Text(img.Ref)
		if i == m.cursor {
			out = append(out, st.Selected.Render(common.Fit("› "+line, m.Width, false)))
			continue
		}
		out = append(out, common.Fit("  "+line, m.Width, false))
	}
	if len(out) > m.Height && m.Height > 0 {
		// Keep the cursor's row on screen.
		start := max(1, min(m.cursor+2-(m.Height-1), len(out)-(m.Height-1)))
		out = append(out[:1], out[start:start+m.Height-1]...)
	}
	return strings.Join(out, "\n")
}
