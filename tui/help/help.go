// Package help is the dashboard's `?` screen: every key and every `:`
// command.
package help

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/tui/common"
)

// Command is one `:` command as the help screen lists it.
type Command struct {
	Name, Help string
}

// Model is the help screen. Any key closes it; the root model does that.
type Model struct {
	common.Common
	commands []Command
}

var _ common.Component = (*Model)(nil)

// New returns the help screen listing the key map and commands.
func New(c common.Common, commands []Command) *Model {
	return &Model{Common: c, commands: commands}
}

// Update does nothing: the screen has no state.
func (m *Model) Update(tea.Msg) (common.Component, tea.Cmd) { return m, nil }

// ShortHelp is nil: any key closes the screen.
func (m *Model) ShortHelp() []key.Binding { return nil }

// View renders the keys and the commands, side by side when there is
// room.
func (m *Model) View() string {
	width, h := m.Width, m.Height
	st := m.Styles
	var lines []string
	lines = append(lines, st.PaneTitle.Render("Keys"))
	for _, b := range m.Keys.Full() {
		lines = append(lines, "  "+st.Key.Render(common.Fit(b.Help().Key, 6, false))+" "+b.Help().Desc)
	}
	cmds := []string{st.PaneTitle.Render("Commands (after :)")}
	for _, c := range m.commands {
		cmds = append(cmds, "  "+st.Key.Render(common.Fit(c.Name, 13, false))+" "+c.Help)
	}
	if width >= 76 {
		// Two columns side by side.
		left := 24
		var out []string
		for i := 0; i < max(len(lines), len(cmds)); i++ {
			l, r := "", ""
			if i < len(lines) {
				l = lines[i]
			}
			if i < len(cmds) {
				r = cmds[i]
			}
			out = append(out, common.Fit(l, left, false)+"  "+r)
		}
		lines = out
	} else {
		lines = append(append(lines, ""), cmds...)
	}
	lines = append(lines, "", st.Dim.Render("Press any key to close."))
	if len(lines) > h {
		lines = append(lines[:h-1], st.Dim.Render("… (a taller terminal shows more; any key closes)"))
	}
	return strings.Join(lines, "\n")
}
