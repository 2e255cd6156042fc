package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpuaas/gpuaas/internal/api"
)

// renderTitle is the top line: who, which project, which view.
func (m *Model) renderTitle(width int) string {
	left := m.st.title.Render("gpuaas")
	if m.who != nil {
		left += " " + m.who.User.Email
	}
	if m.project != "" {
		left += m.st.dim.Render(" · project ") + m.project
	}
	right := "allocations"
	if m.view == viewNodes {
		right = "nodes"
	}
	if m.filter != "" && m.view == viewAllocs {
		right = "/" + m.filter + "  " + right
	}
	return spread(left, m.st.dim.Render(right), width)
}

// renderStatus is the status bar: counts, balance and burn rate, and
// whether events are live.
func (m *Model) renderStatus(width int) string {
	counts := map[string]int{}
	for _, a := range m.allocs {
		counts[a.State]++
	}
	left := fmt.Sprintf(" %d active", counts[api.AllocActive])
	if n := counts[api.AllocRequested] + counts[api.AllocProvisioning]; n > 0 {
		left += fmt.Sprintf(" · %d starting", n)
	}
	if n := counts[api.AllocReleasing]; n > 0 {
		left += fmt.Sprintf(" · %d releasing", n)
	}
	if n := counts[api.AllocFailed] + counts[api.AllocReleaseFailed]; n > 0 {
		left += fmt.Sprintf(" · %d failed", n)
	}
	if !m.showAll {
		left += " · recent"
	}
	balance := "balance —"
	if m.balance != nil {
		balance = "balance " + api.FormatMoney(m.balance.Minor, m.balance.Currency)
	}
	burn, currency := m.burnMinor()
	right := balance + " · burn " + api.FormatMoney(burn, currency) + "/h"
	if m.events {
		right += " · live "
	} else {
		right += " · polling "
	}
	return m.st.status.Render(spread(left, right, width))
}

// renderBottom is the last line: the input being typed, the release
// question, a message, or key hints.
func (m *Model) renderBottom(width int) string {
	switch {
	case m.mode == modeFilter || m.mode == modeCommand:
		return fit(m.input.view(), width, false)
	case m.mode == modeConfirm:
		return m.st.flashErr.Render(fmt.Sprintf("Release %s? Its VM or user is removed and its GPUs wiped. (y/n)", m.confirmID))
	case m.mode == modeWizard:
		return m.st.dim.Render(fit("↑/↓ choose · enter next · esc back · ctrl+c quit", width, false))
	case m.flash != "":
		if m.flashErr {
			return m.st.flashErr.Render(fit(m.flash, width, false))
		}
		return m.st.flash.Render(fit(m.flash, width, false))
	}
	var parts []string
	for _, b := range m.keys.short() {
		parts = append(parts, m.st.key.Render(b.Help().Key)+" "+b.Help().Desc)
	}
	if m.view == viewNodes {
		parts = []string{m.st.key.Render("tab") + " allocations", m.st.key.Render(":") + " command", m.st.key.Render("?") + " help", m.st.key.Render("q") + " quit"}
	}
	return ansi.Truncate(strings.Join(parts, "  "), width, "…")
}

// spread puts left and right on one line of width cells, cutting left
// when they do not fit.
func spread(left, right string, width int) string {
	lw, rw := ansi.StringWidth(left), ansi.StringWidth(right)
	if lw+rw+1 > width {
		left = ansi.Truncate(left, max(0, width-rw-1), "…")
		lw = ansi.StringWidth(left)
	}
	return left + strings.Repeat(" ", max(1, width-lw-rw)) + right
}
