package tui

import (
	"strings"
	"testing"

	controldcatalog "github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/wizard"
)

// withAvailability is the default catalog as catalog.list reports it for
// the dev fleet: one slice host with 4 free GPUs, the bare-metal host
// free, no host for h100-slice.
func withAvailability() []api.SKU {
	av := map[string]*api.SKUAvailability{"h200-slice": {Nodes: 1, FreeGPUs: 4}, "h100-slice": {Nodes: 0},
		"h100-baremetal": {Nodes: 1, FreeGPUs: 8}}
	var out []api.SKU
	for _, s := range controldcatalog.Defaults {
		s.Availability = av[s.ID]
		out = append(out, s)
	}
	return out
}

// TestWizardOffersOnlyWhatCanBeHad is the regression test of "the TUI
// wizard offers what cannot be had": a SKU no host serves is marked and
// cannot be chosen, GPU counts larger than what is free are marked, and a
// create the dry run says does not fit, or cannot be paid for, is not
// sent.
func TestWizardOffersOnlyWhatCanBeHad(t *testing.T) {
	b := newFixtureBackend()
	m := newTestModel(t, b)
	m.Update(catalogMsg{skus: withAvailability()})
	press(m, "c")
	if v := m.View(); !strings.Contains(v, "no host") || !strings.Contains(v, "4 free") {
		t.Fatalf("SKU page:\n%s\nwant h100-slice marked as served by no host and h200-slice's free GPUs", v)
	}
	typeText(m, "h100-s")
	press(m, "enter")
	if m.wizard.Step() != wizard.StepSKU || !strings.Contains(m.View(), "no host serves h100-slice now") {
		t.Fatalf("enter on h100-slice: step %d:\n%s\nwant refused on the SKU page", m.wizard.Step(), m.View())
	}
	press(m, "esc")
	tests := []struct {
		name    string
		verdict *backend.Verdict
		want    string
	}{
		{"does not fit", &backend.Verdict{Currency: "usd"}, "8 × h200-slice does not fit now"},
		{"would queue", &backend.Verdict{Currency: "usd", QueuePosition: 2}, "8 × h200-slice does not fit now"},
		{"cannot pay", &backend.Verdict{Fits: true, Currency: "usd", InsufficientFunds: true}, "the balance of dev is too low"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.verdict = tt.verdict
			press(m, "c")
			typeText(m, "h200")
			press(m, "enter", "8")
			if !strings.Contains(m.View(), "8 × H200") || !strings.Contains(m.View(), "not free now") {
				t.Fatalf("GPU page:\n%s\nwant 8 GPUs marked as not free now", m.View())
			}
			press(m, "enter")
			drain(t, m, press(m, "enter"))
			drain(t, m, press(m, "enter"))
			if len(b.created) != 0 || m.wizard.Step() != wizard.StepConfirm || !strings.Contains(m.View(), tt.want) {
				t.Fatalf("created %+v, step %d:\n%s\nwant nothing sent and %q", b.created, m.wizard.Step(), m.View(), tt.want)
			}
			press(m, "esc", "esc", "esc", "esc")
		})
	}
	b.verdict = &backend.Verdict{Fits: true, Currency: "usd"}
	press(m, "c")
	typeText(m, "h200")
	press(m, "enter", "2", "enter")
	drain(t, m, press(m, "enter"))
	drain(t, m, press(m, "enter"))
	if len(b.created) != 1 {
		t.Fatalf("a create that fits: created %+v; want it sent", b.created)
	}
}

// TestWizardVerdictWithoutTopups: where the platform takes no top-ups, the
// verdict does not send the user to `gpuaas billing topup`.
func TestWizardVerdictWithoutTopups(t *testing.T) {
	b := newFixtureBackend()
	small, short := int64(100), int64(100*3600/700)
	b.verdict = &backend.Verdict{Fits: true, Currency: "usd", BalanceMinor: &small, RunwaySeconds: &short, PricePerHourMinor: 700,
		BurnPerHourMinor: 700, InsufficientFunds: true, NeededMinor: 117, MinRunwaySeconds: 600, TopupsOff: true}
	m := newTestModel(t, b)
	press(m, "c")
	typeText(m, "h200")
	press(m, "enter", "enter")
	drain(t, m, press(m, "enter"))
	if v := m.View(); !strings.Contains(v, "no top-ups here: ask an admin") || strings.Contains(v, "billing topup") {
		t.Fatalf("confirm page:\n%s\nwant the credit hint, not the top-up command", v)
	}
}
