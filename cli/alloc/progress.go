package alloc

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// progressView shows a wait as it goes, on stderr: a spinner over the
// phases when stderr is a terminal, plain lines otherwise.
type progressView interface {
	// state reports the allocation's state (called on every read).
	state(a *api.Allocation)
	// phase reports a step of the timeline not shown yet.
	phase(p api.PhaseTiming)
	// stop ends the display; it returns once the terminal is left clean.
	stop()
}

// newProgressView picks the view for ios.
func newProgressView(ios *cmdutil.IOStreams, id string) progressView {
	if ios.IsStderrTTY() {
		return startSpinner(ios.ErrOut, id)
	}
	return &plainProgress{ios: ios}
}

// plainProgress writes one line per state change and per phase, for logs
// and pipes.
type plainProgress struct {
	ios       *cmdutil.IOStreams
	lastState string
}

func (p *plainProgress) state(a *api.Allocation) {
	if a.State != p.lastState {
		fmt.Fprintf(p.ios.ErrOut, "%s is %s\n", a.ID, a.State)
		p.lastState = a.State
	}
}

func (p *plainProgress) phase(ph api.PhaseTiming) {
	fmt.Fprintln(p.ios.ErrOut, phaseLine(p.ios.ColorScheme(), ph))
}

func (p *plainProgress) stop() {}

// phaseLine is one timeline step: "  define_start     done        812ms".
func phaseLine(cs cmdutil.ColorScheme, p api.PhaseTiming) string {
	status := p.Status
	switch p.Status {
	case api.PhaseDone:
		status = cs.Green(status)
	case api.PhaseFailed:
		status = cs.Red(status)
	case api.PhaseCleanup:
		status = cs.Yellow(status)
	}
	line := fmt.Sprintf("  %-16s %-8s", p.Phase, status)
	if p.Status != api.PhaseStarted {
		line += fmt.Sprintf(" %6dms", p.ElapsedMS)
	}
	if p.Message != "" {
		line += "  " + p.Message
	}
	return line
}

// Messages the waiter sends the spinner program.
type (
	stateMsg struct{ state string }
	phaseMsg struct{ phase api.PhaseTiming }
	doneMsg  struct{}
)

// progressModel is the Bubble Tea model of the terminal view: the phases
// that finished, then a spinner line with the state and the phase running.
type progressModel struct {
	spinner spinner.Model
	id      string
	state   string
	running string // the phase started and not finished yet
	lines   []string
	done    bool
}

func newProgressModel(id string) progressModel {
	return progressModel{spinner: spinner.New(spinner.WithSpinner(spinner.Dot)), id: id}
}

// Init starts the spinner.
func (m progressModel) Init() tea.Cmd { return m.spinner.Tick }

// Update handles the waiter's messages and the spinner's ticks.
func (m progressModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case stateMsg:
		if msg.state != m.state {
			m.state = msg.state
			m.lines = append(m.lines, fmt.Sprintf("%s is %s", m.id, m.state))
		}
	case phaseMsg:
		p := msg.phase
		if p.Status == api.PhaseStarted {
			m.running = p.Phase
			return m, nil
		}
		if p.Phase == m.running {
			m.running = ""
		}
		m.lines = append(m.lines, phaseLine(cmdutil.ColorScheme{}, p))
	case doneMsg:
		m.done = true
		return m, tea.Quit
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spinner, cmd = m.spinner.Update(msg)
		return m, cmd
	}
	return m, nil
}

// View is the finished lines and, until done, the spinner line.
func (m progressModel) View() string {
	var b strings.Builder
	for _, l := range m.lines {
		b.WriteString(l + "\n")
	}
	if m.done {
		return b.String()
	}
	b.WriteString(strings.TrimSpace(m.spinner.View()) + " " + m.id)
	if m.state != "" {
		b.WriteString(" " + m.state)
	}
	if m.running != "" {
		b.WriteString(" · " + m.running)
	}
	return b.String()
}

// spinnerProgress runs progressModel on the terminal.
type spinnerProgress struct {
	prog *tea.Program
	ran  chan struct{}
}

// startSpinner runs the view on w. It reads no input and installs no
// signal handler (Ctrl-C stays the CLI's), and sends the terminal no
// queries, so it cannot hang on a terminal that does not answer.
func startSpinner(w io.Writer, id string) *spinnerProgress {
	p := &spinnerProgress{
		prog: tea.NewProgram(newProgressModel(id), tea.WithInput(nil), tea.WithOutput(w), tea.WithoutSignalHandler()),
		ran:  make(chan struct{}),
	}
	go func() {
		defer close(p.ran)
		_, _ = p.prog.Run()
	}()
	return p
}

func (p *spinnerProgress) state(a *api.Allocation) { p.prog.Send(stateMsg{a.State}) }

func (p *spinnerProgress) phase(ph api.PhaseTiming) { p.prog.Send(phaseMsg{ph}) }

func (p *spinnerProgress) stop() {
	p.prog.Send(doneMsg{})
	<-p.ran
}
