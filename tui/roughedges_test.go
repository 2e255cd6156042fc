package tui

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/common"
)

// runProgram runs the dashboard over b as a program (teatest) at w×h,
// waits until it has loaded and shows waitText, sends keys, waits for
// after (when set), quits and returns the final model.
func runProgram(t *testing.T, b backend.Backend, o Options, w, h int, waitText string, keys []string, after ...string) *Model {
	t.Helper()
	o.Backend, o.Context, o.Now, o.Project, o.Refresh = b, t.Context(), func() time.Time { return t0 }, "dev", time.Hour
	tm := teatest.NewTestModel(t, New(o), teatest.WithInitialTermSize(w, h))
	waitFor(t, tm, waitText, "live")
	for _, k := range keys {
		tm.Send(keyMsg(k))
	}
	if len(after) > 0 {
		waitFor(t, tm, after...)
	}
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	return tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
}

// TestDetailPaneOnTinyTerminal: with the detail pane open on a terminal
// of about 5 rows, the dashboard panicked (the pane cut its lines to a
// negative count). At every small height it draws the screen, exactly as
// tall as the terminal (5 rows at least).
func TestDetailPaneOnTinyTerminal(t *testing.T) {
	for _, h := range []int{3, 4, 5, 6, 7, 8} {
		t.Run(strconv.Itoa(h)+"rows", func(t *testing.T) {
			m := runProgram(t, newFixtureBackend(), Options{}, 80, h, "a-prov00000001", []string{"enter"})
			if !m.detailOpen {
				t.Fatal("enter did not open the detail pane")
			}
			v := m.View()
			if got, want := strings.Count(v, "\n")+1, max(h, chromeLines+2); got != want {
				t.Errorf("view has %d lines; want %d:\n%s", got, want, v)
			}
		})
	}
}

// slowGet is the fixture with controld failing to read one allocation:
// the detail pane's read never refreshes the table.
type slowGet struct{ *fixtureBackend }

func (slowGet) GetAlloc(context.Context, string) (*api.Allocation, error) {
	return nil, api.Errorf(api.CodeUnavailable, "controld took too long")
}

// TestDetailOpenKeepsCursorOnScreen: opening the detail pane shrinks the
// table; with the cursor on a low row, the selected row went off screen
// (until a later read of the list happened to put it back).
func TestDetailOpenKeepsCursorOnScreen(t *testing.T) {
	b := newFixtureBackend()
	b.allocs = manyAllocs(60)
	last := b.allocs[len(b.allocs)-1].ID
	m := runProgram(t, slowGet{b}, Options{}, 80, 24, b.allocs[0].ID, []string{"G", "enter"}, "controld took too long")
	if !m.detailOpen || m.selectedID() != last {
		t.Fatalf("detail open %v, selected %s; want the pane open on %s", m.detailOpen, m.selectedID(), last)
	}
	table := m.table.View()
	if !strings.Contains(table, "› "+last) {
		t.Errorf("the table does not show the selected row %s with the pane open:\n%s", last, table)
	}
	if c, off := m.table.Cursor(), m.table.Offset(); c < off || c >= off+m.tableHeight() {
		t.Errorf("cursor %d outside rows %d..%d on screen", c, off, off+m.tableHeight()-1)
	}
}

// TestNodesHealthColouredNotTask: the nodes view painted the TASK column
// red for an unhealthy node instead of HEALTH. In colour, slice-2's
// health ("2 issues") is red and its task count is not.
func TestNodesHealthColouredNotTask(t *testing.T) {
	r := common.NewRenderer(nil, termenv.ANSI256)
	b := newFixtureBackend()
	m := runProgram(t, b, Options{Renderer: r}, 120, 40, "a-fail00000004", []string{"tab"}, "slice-2")
	st := common.NewStyles(r)
	var row string
	for _, l := range strings.Split(m.nodes.View(), "\n") {
		if strings.Contains(l, "slice-2") {
			row = l
		}
	}
	if row == "" {
		t.Fatalf("no slice-2 row in the nodes view:\n%s", m.nodes.View())
	}
	health := st.Bad.Render(common.Fit("2 issues", 8, false))
	task := st.Bad.Render(common.Fit("0", 4, true))
	if !strings.Contains(row, health) {
		t.Errorf("slice-2 row %q: want its HEALTH cell in red (%q)", row, health)
	}
	if strings.Contains(row, task) {
		t.Errorf("slice-2 row %q: want its TASK cell not red", row)
	}
}
