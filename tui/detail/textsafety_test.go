package detail

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/muesli/termenv"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/common"
)

// TestDetailNeutralisesControlCharacters: a release reason (another
// member's text) and a host's phase name holding escape sequences are
// shown as visible escapes in the detail pane, never sent to the
// terminal as they are.
func TestDetailNeutralisesControlCharacters(t *testing.T) {
	sel := &selection{}
	m := New(context.Background(), common.Common{Styles: common.NewStyles(common.NewRenderer(nil, termenv.Ascii)),
		Keys: common.DefaultKeys(), Now: func() time.Time { return t0 }}, nil, sel, nil)
	m.SetSize(140, 40)
	a := api.Allocation{ID: "a-1", SKU: "h200-slice", GPUs: 1, Shape: api.ShapeGPUSlice, State: api.AllocReleasing, Version: 2,
		Reason: "bye\x1b]0;pwned\x07\x1b[2J\u202e", CreatedAt: t0.Add(-time.Hour), UpdatedAt: t0,
		Timeline: steps(api.TaskVMRelease, "t-rel", t0, "shut\x1b[8mdown/started", "shut\x1b[8mdown/done")}
	sel.a = a
	m.Update(LoadedMsg{Alloc: &a})
	v := m.render(140, 40)
	// Styles are off (Ascii), so the pane has no escape of its own.
	if strings.ContainsAny(v, "\x1b\x07\u202e") {
		t.Fatalf("the pane holds raw control characters:\n%q", v)
	}
	for _, want := range []string{`bye\x1b]0;pwned\x07\x1b[2J\u202e`, `shut\x1b[8mdown`} {
		if !strings.Contains(v, want) {
			t.Errorf("the pane does not show %s:\n%s", want, v)
		}
	}
}
