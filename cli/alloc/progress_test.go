package alloc

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
)

func update(t *testing.T, m progressModel, msg tea.Msg) (progressModel, tea.Cmd) {
	t.Helper()
	next, cmd := m.Update(msg)
	pm, ok := next.(progressModel)
	if !ok {
		t.Fatalf("Update returned %T; want progressModel", next)
	}
	return pm, cmd
}

func TestProgressModel(t *testing.T) {
	m := newProgressModel("a-1")
	if m.Init() == nil {
		t.Fatal("Init returned no command; want the spinner's tick")
	}
	frame0 := strings.TrimSpace(m.spinner.View())
	if got, want := m.View(), frame0+" a-1"; got != want {
		t.Errorf("initial view %q; want %q", got, want)
	}

	m, _ = update(t, m, stateMsg{api.AllocProvisioning})
	m, _ = update(t, m, stateMsg{api.AllocProvisioning}) // no change, no new line
	m, _ = update(t, m, phaseMsg{api.PhaseTiming{Phase: "lease", Status: api.PhaseStarted}})
	if got, want := m.View(), "a-1 is provisioning\n"+frame0+" a-1 provisioning · lease"; got != want {
		t.Errorf("while lease runs: view %q; want %q", got, want)
	}

	m, _ = update(t, m, phaseMsg{api.PhaseTiming{Phase: "lease", Status: api.PhaseDone, ElapsedMS: 12}})
	want := "a-1 is provisioning\n  lease            done         12ms\n" + frame0 + " a-1 provisioning"
	if got := m.View(); got != want {
		t.Errorf("after lease: view %q; want %q", got, want)
	}

	// The spinner turns on its own ticks.
	m, cmd := update(t, m, spinner.TickMsg{ID: m.spinner.ID(), Time: time.Now()})
	if cmd == nil {
		t.Error("a tick returned no next tick")
	}
	if frame1 := strings.TrimSpace(m.spinner.View()); frame1 == frame0 || !strings.HasSuffix(m.View(), frame1+" a-1 provisioning") {
		t.Errorf("after a tick: view %q; want the next frame", m.View())
	}

	m, _ = update(t, m, stateMsg{api.AllocActive})
	m, cmd = update(t, m, doneMsg{})
	if cmd == nil {
		t.Fatal("done returned no command; want quit")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Error("done's command is not tea.Quit")
	}
	want = "a-1 is provisioning\n  lease            done         12ms\na-1 is active\n"
	if got := m.View(); got != want {
		t.Errorf("done: view %q; want %q (no spinner left)", got, want)
	}
}

// TestSpinnerProgramRuns drives the real Bubble Tea program: it starts
// without input or signal handling, takes the waiter's messages, and
// leaves the finished lines on its output when stopped.
func TestSpinnerProgramRuns(t *testing.T) {
	out := &lockedBuffer{}
	p := startSpinner(out, "a-1")
	p.state(&api.Allocation{ID: "a-1", State: api.AllocProvisioning})
	p.phase(api.PhaseTiming{Phase: "seed", Status: api.PhaseDone, ElapsedMS: 5})
	p.state(&api.Allocation{ID: "a-1", State: api.AllocActive})
	stopped := make(chan struct{})
	go func() { p.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the spinner did not stop")
	}
	got := out.String()
	for _, want := range []string{"a-1 is provisioning", "seed             done          5ms", "a-1 is active"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%q", want, got)
		}
	}
}
