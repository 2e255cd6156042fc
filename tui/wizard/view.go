package wizard

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/common"
)

// View renders the wizard's current page in a dialog at most the width.
func (m *Model) View() string {
	width := m.Width
	st := m.Styles
	var b strings.Builder
	steps := []string{"1 SKU", "2 GPUs", "3 project", "4 confirm"}
	for i, s := range steps {
		if i > 0 {
			b.WriteString(st.Dim.Render(" › "))
		}
		if Step(i) == m.step {
			b.WriteString(st.Key.Render(s))
		} else {
			b.WriteString(st.Dim.Render(s))
		}
	}
	b.WriteString("\n\n")
	cursor := func(on bool) string {
		if on {
			return st.Key.Render("› ")
		}
		return "  "
	}
	switch m.step {
	case StepSKU:
		b.WriteString("SKU: " + m.skuFilter + "█  " + st.Dim.Render("(type to filter)") + "\n")
		for i, s := range m.FilteredSKUs() {
			// What the fleet has now, when catalog.list said.
			avail := ""
			switch av := s.Availability; {
			case av == nil:
			case av.Nodes == 0:
				avail = "no host"
			default:
				avail = fmt.Sprintf("%d free", av.FreeGPUs)
			}
			line := fmt.Sprintf("%s %-9s %-4s %s/GPU-h  %-7s  %s GPUs", common.Fit(s.ID, 15, false), s.Shape, s.GPUModel,
				api.FormatMoney(s.PricePerGPUHourMinor, s.Currency), avail, slashCounts(s.GPUCounts))
			if s.Availability != nil && s.Availability.Nodes == 0 {
				line = st.Dim.Render(line)
			}
			b.WriteString(cursor(i == m.skuCursor) + line + "\n")
		}
	case StepGPUs:
		b.WriteString(fmt.Sprintf("GPUs for %s:\n", st.Bold.Render(m.sku.ID)))
		for i, n := range m.sku.GPUCounts {
			line := fmt.Sprintf("%d × %s  %s/h", n, m.sku.GPUModel, api.FormatMoney(common.HourlyMinor(m.sku, n), m.sku.Currency))
			if av := m.sku.Availability; av != nil && n > av.FreeGPUs {
				line = st.Dim.Render(line + "  not free now")
			}
			b.WriteString(cursor(i == m.gpuCursor) + line + "\n")
		}
	case StepProject:
		b.WriteString("Project:\n")
		for i, p := range m.projects {
			b.WriteString(cursor(i == m.projCursor) + p + "\n")
		}
		if len(m.projects) == 0 {
			b.WriteString(st.Dim.Render("  (none)") + "\n")
		}
	case StepConfirm:
		k := m.key()
		b.WriteString(fmt.Sprintf("Create %s × %d GPU in project %s\n", st.Bold.Render(k.sku), k.gpus, st.Bold.Render(k.project)))
		b.WriteString("price:   " + api.FormatMoney(common.HourlyMinor(m.sku, k.gpus), m.sku.Currency) + "/h\n")
		b.WriteString(m.verdictText() + "\n\n")
		if m.busy {
			b.WriteString(st.Dim.Render("creating…"))
		} else {
			b.WriteString(st.Key.Render("enter") + " create   " + st.Key.Render("esc") + " back")
		}
		b.WriteString("\n")
	}
	if m.err != nil {
		b.WriteString("\n" + st.FlashErr.Render(common.ErrorText(m.err)) + "\n")
	}
	return st.Dialog.Width(max(20, min(width-2, 76))).Render(strings.TrimRight(b.String(), "\n"))
}

// verdictText is the dry-run verdict in words.
func (m *Model) verdictText() string {
	st := m.Styles
	switch {
	case m.checking:
		return "verdict: " + st.Dim.Render("checking…")
	case errors.Is(m.verdictErr, backend.ErrUnsupported):
		return st.Dim.Render("verdict unavailable")
	case m.verdictErr != nil:
		return "verdict: " + st.Bad.Render(common.ErrorText(m.verdictErr))
	case m.verdict == nil:
		return st.Dim.Render("verdict unavailable")
	}
	v := m.verdict
	var parts []string
	switch {
	case v.Fits:
		parts = append(parts, st.OK.Render("fits now"))
	case v.QueuePosition > 0:
		parts = append(parts, st.Warn.Render(fmt.Sprintf("no capacity now; queue position %d", v.QueuePosition)))
	default:
		parts = append(parts, st.Bad.Render("does not fit"))
	}
	if v.BalanceMinor != nil {
		parts = append(parts, "balance "+api.FormatMoney(*v.BalanceMinor, v.Currency))
	}
	if v.RunwaySeconds != nil {
		parts = append(parts, "runway "+api.FormatRunway(*v.RunwaySeconds))
	}
	out := "verdict: " + strings.Join(parts, " · ")
	// The runway is the project's, at its total burn (what runs and this
	// one), as `billing balance` counts it: say so when something runs.
	if running := v.BurnPerHourMinor - v.PricePerHourMinor; v.RunwaySeconds != nil && running > 0 {
		out += fmt.Sprintf("\nburn:    %s/h with the %s/h already running", api.FormatMoney(v.BurnPerHourMinor, v.Currency),
			api.FormatMoney(running, v.Currency))
	}
	if v.InsufficientFunds {
		how := " · gpuaas billing topup"
		if v.TopupsOff {
			how = " · no top-ups here: ask an admin"
		}
		out += "\nfunds:   " + st.Bad.Render(fmt.Sprintf("too low, %s needed for %s", api.FormatMoney(v.NeededMinor, v.Currency),
			api.FormatRunway(v.MinRunwaySeconds))) + how
	}
	return out
}

// slashCounts is "1/2/4/8": a SKU's GPU counts, short enough for its line.
func slashCounts(counts []int) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprint(c)
	}
	return strings.Join(parts, "/")
}
