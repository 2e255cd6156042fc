package tui

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

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
	m.detailOpen = false
	return m.loadNodes()
}

// keyNodes handles the keys that differ in the nodes view.
func (m *Model) keyNodes(k tea.KeyMsg) (tea.Cmd, bool) {
	switch {
	case key.Matches(k, m.keys.Up):
		m.nodeCursor = max(0, m.nodeCursor-1)
	case key.Matches(k, m.keys.Down):
		m.nodeCursor = max(0, min(len(m.nodes)-1, m.nodeCursor+1))
	case key.Matches(k, m.keys.Back):
		m.view = viewAllocs
	default:
		return nil, false
	}
	return nil, true
}

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

var nodeColumns = []column{
	{"NAME", 11, false}, {"STATE", 8, false}, {"GPU", 10, false}, {"USED", 4, true}, {"FREE", 4, true},
	{"PEND", 4, true}, {"TASK", 4, true}, {"HEALTH", 8, false}, {"HEARTBEAT", 9, true},
}

// shapeShort names a shape in a few letters for the nodes table.
func shapeShort(shape string) string {
	if shape == api.ShapeBaremetal {
		return "metal"
	}
	return "slice"
}

// renderNodes renders the nodes table, width wide and h rows tall.
func (m *Model) renderNodes(width, h int) string {
	var b strings.Builder
	b.WriteString(m.st.header.Render(fit("  "+headerLine(nodeColumns), width, false)))
	switch {
	case m.nodesErr != nil:
		b.WriteString("\n" + m.st.bad.Render("cannot list nodes: "+errorText(m.nodesErr)))
		return b.String()
	case len(m.nodes) == 0:
		b.WriteString("\n" + m.st.dim.Render("No nodes (or still loading)."))
		return b.String()
	}
	now := m.now()
	off := max(0, m.nodeCursor-h+1)
	for i := off; i < min(len(m.nodes), off+h); i++ {
		n := m.nodes[i]
		health, healthy := nodeHealth(n)
		hb := "never"
		if n.LastHeartbeat != nil {
			hb = cmdutil.FuzzyAgo(now, *n.LastHeartbeat)
		}
		cells := []string{n.Name, n.State, n.GPUModel + " " + shapeShort(n.Shape), strconv.Itoa(n.SlotsTotal - n.SlotsFree),
			strconv.Itoa(n.SlotsFree), strconv.Itoa(n.SlotsPending), strconv.Itoa(n.TasksOpen), health, hb}
		b.WriteByte('\n')
		parts := make([]string, len(cells))
		for j, c := range cells {
			parts[j] = fit(c, nodeColumns[j].width, nodeColumns[j].right)
		}
		if i == m.nodeCursor {
			b.WriteString(m.st.selected.Render(fit("› "+strings.Join(parts, "  "), width, false)))
			continue
		}
		b.WriteString("  ")
		switch {
		case n.State != api.NodeReady:
			parts[1] = m.st.warn.Render(parts[1])
		default:
			parts[1] = m.st.ok.Render(parts[1])
		}
		if !healthy {
			parts[6] = m.st.bad.Render(parts[6])
		}
		b.WriteString(strings.Join(parts, "  "))
	}
	return b.String()
}
