// Package nodes is the dashboard's nodes view, for operators: every node's
// state, capacity, open tasks, health and last heartbeat.
package nodes

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fuzzytime"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/common"
)

// Lister is what the view asks of controld.
type Lister interface {
	ListNodes(ctx context.Context) ([]api.Node, error)
}

// LoadedMsg is the answer to Load.
type LoadedMsg struct {
	Nodes []api.Node
	Err   error
}

// Model is the nodes view: a header and one row per node.
type Model struct {
	common.Common
	ctx    context.Context
	list   Lister
	nodes  []api.Node
	cursor int
	err    error
	hints  []key.Binding
}

var _ common.Component = (*Model)(nil)

// New returns the view, listing nodes from l within ctx.
func New(ctx context.Context, c common.Common, l Lister) *Model {
	k := c.Keys
	back := key.NewBinding(key.WithKeys(k.Nodes.Keys()...), key.WithHelp("tab", "allocations"))
	return &Model{Common: c, ctx: ctx, list: l, hints: []key.Binding{back, k.Command, k.Help, k.Quit}}
}

// Load lists the nodes.
func (m *Model) Load() tea.Cmd {
	l, ctx := m.list, m.ctx
	return func() tea.Msg {
		ns, err := backend.Call(ctx, l.ListNodes)
		return LoadedMsg{ns, err}
	}
}

// Update takes a LoadedMsg, and moves the cursor on up and down.
func (m *Model) Update(msg tea.Msg) (common.Component, tea.Cmd) {
	switch msg := msg.(type) {
	case LoadedMsg:
		m.err = msg.Err
		if msg.Err == nil {
			m.nodes = msg.Nodes
			m.cursor = min(m.cursor, max(0, len(m.nodes)-1))
		}
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, m.Keys.Up):
			m.cursor = max(0, m.cursor-1)
		case key.Matches(msg, m.Keys.Down):
			m.cursor = max(0, min(len(m.nodes)-1, m.cursor+1))
		}
	}
	return m, nil
}

// ShortHelp is the nodes view's key hints.
func (m *Model) ShortHelp() []key.Binding { return m.hints }

// Cursor is the selected node's index.
func (m *Model) Cursor() int { return m.cursor }

// nodeHealth summarises a node's stored health: its probe's problems and
// discovery's blockers.
func nodeHealth(n api.Node) (string, bool) {
	if len(n.Health) == 0 {
		return "no report", false
	}
	var h struct {
		Probe *struct {
			Problems []string `json:"problems"`
		} `json:"probe"`
		Topology *struct {
			Blockers []api.Blocker `json:"blockers"`
		} `json:"topology"`
	}
	if err := json.Unmarshal(n.Health, &h); err != nil {
		return "unreadable", false
	}
	var problems, blockers int
	if h.Probe != nil {
		problems = len(h.Probe.Problems)
	}
	if h.Topology != nil {
		blockers = len(h.Topology.Blockers)
	}
	switch {
	case problems > 0 && blockers > 0:
		return plural(problems+blockers, "issue"), false
	case problems > 0:
		return plural(problems, "problem"), false
	case blockers > 0:
		return plural(blockers, "blocker"), false
	}
	if h.Probe == nil {
		return "no probe yet", true
	}
	return "ok", true
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// The columns coloured by state and health, by index in columns.
const (
	colState  = 1
	colHealth = 7
)

var columns = []common.Column{
	{Title: "NAME", Width: 11}, {Title: "STATE", Width: 8}, {Title: "GPU", Width: 10}, {Title: "USED", Width: 4, Right: true},
	{Title: "FREE", Width: 4, Right: true}, {Title: "PEND", Width: 4, Right: true}, {Title: "TASK", Width: 4, Right: true},
	{Title: "HEALTH", Width: 8}, {Title: "HEARTBEAT", Width: 9, Right: true},
}

// View renders the nodes table: the header and as many rows as fit.
func (m *Model) View() string {
	width, h := m.Width, m.Height
	st := m.Styles
	var b strings.Builder
	b.WriteString(st.Header.Render(common.Fit("  "+common.HeaderLine(columns), width, false)))
	switch {
	case m.err != nil:
		b.WriteString("\n" + st.Bad.Render("cannot list nodes: "+common.ErrorText(m.err)))
		return b.String()
	case len(m.nodes) == 0:
		b.WriteString("\n" + st.Dim.Render("No nodes (or still loading)."))
		return b.String()
	}
	now := m.Now()
	off := max(0, m.cursor-h+1)
	for i := off; i < min(len(m.nodes), off+h); i++ {
		n := m.nodes[i]
		health, healthy := nodeHealth(n)
		hb := "never"
		if n.LastHeartbeat != nil {
			hb = fuzzytime.Ago(now, *n.LastHeartbeat)
		}
		cells := []string{common.Text(n.Name), n.State, common.Text(n.GPUModel) + " " + api.ShortShape(n.Shape), strconv.Itoa(n.SlotsTotal - n.SlotsFree),
			strconv.Itoa(n.SlotsFree), strconv.Itoa(n.SlotsPending), strconv.Itoa(n.TasksOpen), health, hb}
		b.WriteByte('\n')
		parts := make([]string, len(cells))
		for j, c := range cells {
			parts[j] = common.Fit(c, columns[j].Width, columns[j].Right)
		}
		if i == m.cursor {
			b.WriteString(st.Selected.Render(common.Fit("› "+strings.Join(parts, "  "), width, false)))
			continue
		}
		b.WriteString("  ")
		switch {
		case n.State != api.NodeReady:
			parts[colState] = st.Warn.Render(parts[colState])
		default:
			parts[colState] = st.OK.Render(parts[colState])
		}
		if !healthy {
			parts[colHealth] = st.Bad.Render(parts[colHealth])
		}
		b.WriteString(strings.Join(parts, "  "))
	}
	return b.String()
}
