package tui

import (
	"strings"
)

// renderHelp is the `?` screen: every key and every `:` command.
func (m *Model) renderHelp(width, h int) string {
	var lines []string
	lines = append(lines, m.st.paneTitle.Render("Keys"))
	for _, b := range m.keys.full() {
		lines = append(lines, "  "+m.st.key.Render(fit(b.Help().Key, 6, false))+" "+b.Help().Desc)
	}
	cmds := []string{m.st.paneTitle.Render("Commands (after :)")}
	for _, c := range commands {
		cmds = append(cmds, "  "+m.st.key.Render(fit(c.name, 13, false))+" "+c.help)
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
			out = append(out, fit(l, left, false)+"  "+r)
		}
		lines = out
	} else {
		lines = append(append(lines, ""), cmds...)
	}
	lines = append(lines, "", m.st.dim.Render("Press any key to close."))
	if len(lines) > h {
		lines = append(lines[:h-1], m.st.dim.Render("… (a taller terminal shows more; any key closes)"))
	}
	return strings.Join(lines, "\n")
}
