package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/common"
)

// renderTitle is the top line: who, which project, which view.
func (m *Model) renderTitle(width int) string {
	st := m.common.Styles
	left := st.Title.Render("gpuaas")
	if m.who != nil {
		left += " " + common.Text(m.who.User.Email)
	}
	if m.project != "" {
		left += st.Dim.Render(" · project ") + common.Text(m.project)
	}
	right := "allocations"
	switch m.view {
	case viewNodes:
		right = "nodes"
	case viewJobs:
		right = "jobs"
	}
	if f := m.table.Filter(); f != "" && m.view == viewAllocs {
		right = "/" + f + "  " + right
	}
	return spread(left, st.Dim.Render(right), width)
}

// renderStatus is the status bar: counts, balance and burn rate, and
// whether events are live.
func (m *Model) renderStatus(width int) string {
	counts := map[string]int{}
	for _, a := range m.table.Allocs() {
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
	if !m.table.ShowAll() {
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
	return m.common.Styles.Status.Render(spread(left, right, width))
}

// burnMinor is what the active allocations cost per hour together, and
// their currency.
func (m *Model) burnMinor() (int64, string) {
	var total int64
	currency := ""
	for _, a := range m.table.Allocs() {
		if a.State != api.AllocActive {
			continue
		}
		if s, ok := common.SKUByID(m.skus, a.SKU); ok {
			total += common.HourlyMinor(s, a.GPUs)
			currency = s.Currency
		}
	}
	return total, currency
}

// renderBottom is the last line: the input being typed, the release
// question, a message, or the key hints of what is on screen.
func (m *Model) renderBottom(width int) string {
	st := m.common.Styles
	switch {
	case m.mode == modeFilter || m.mode == modeCommand:
		return m.input.View()
	case m.mode == modeConfirm:
		return st.FlashErr.Render(fmt.Sprintf("Release %s? Its VM or user is removed and its GPUs wiped. (y/n)", m.confirmID))
	case m.mode == modeWizard:
		return st.Dim.Render(common.Fit(strings.Join(hints(m.wizard.ShortHelp(), plain), " · "), width, false))
	case m.mode == modeAppConfirm:
		return st.Flash.Render(common.Fit(fmt.Sprintf("Run %s on %s? (y/n)", common.Text(m.appChoice.Name), m.apps.AllocID()), width, false))
	case m.mode == modeApps && m.flash == "":
		return st.Dim.Render(common.Fit(strings.Join(hints(m.apps.ShortHelp(), plain), " · "), width, false))
	case m.flash != "":
		if m.flashErr {
			return st.FlashErr.Render(common.Fit(m.flash, width, false))
		}
		return st.Flash.Render(common.Fit(m.flash, width, false))
	}
	return ansi.Truncate(strings.Join(hints(m.page().ShortHelp(), func(k string) string { return st.Key.Render(k) }), "  "), width, "…")
}

// hints are bindings as "key desc", the key as renderKey renders it.
func hints(bs []key.Binding, renderKey func(string) string) []string {
	parts := make([]string, 0, len(bs))
	for _, b := range bs {
		parts = append(parts, renderKey(b.Help().Key)+" "+b.Help().Desc)
	}
	return parts
}

func plain(s string) string { return s }

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
