// Package cmdline is the dashboard's one-line input: the filter typed
// after `/` and the command typed after `:`. (bubbles' textinput blinks
// its cursor on a timer, which makes frames depend on time.)
package cmdline

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/tui/common"
)

// Status says what the last key did to the line.
type Status int

const (
	// Editing: the line is still being typed.
	Editing Status = iota
	// Done: enter was pressed.
	Done
	// Cancelled: esc, ctrl+c, or backspace on an empty line.
	Cancelled
)

// Model is the input line: a prompt, the text typed, and a block cursor.
type Model struct {
	common.Common
	prompt string
	value  []rune
	status Status
}

var _ common.Component = (*Model)(nil)

// New returns an empty line.
func New(c common.Common) *Model { return &Model{Common: c} }

// Reset starts a new line after prompt, holding value.
func (m *Model) Reset(prompt, value string) {
	m.prompt, m.value, m.status = prompt, []rune(value), Editing
}

// Value is the text typed.
func (m *Model) Value() string { return string(m.value) }

// Status is what the last key did.
func (m *Model) Status() Status { return m.status }

// Update applies one key; Status then says whether the line is done.
func (m *Model) Update(msg tea.Msg) (common.Component, tea.Cmd) {
	if k, ok := msg.(tea.KeyMsg); ok {
		m.status = m.handle(k)
	}
	return m, nil
}

func (m *Model) handle(k tea.KeyMsg) Status {
	switch k.Type {
	case tea.KeyEnter:
		return Done
	case tea.KeyEsc, tea.KeyCtrlC:
		return Cancelled
	case tea.KeyBackspace, tea.KeyCtrlH:
		if len(m.value) == 0 {
			return Cancelled // backspace on an empty line leaves it, as in vim
		}
		m.value = m.value[:len(m.value)-1]
	case tea.KeyCtrlU:
		m.value = m.value[:0]
	case tea.KeySpace:
		m.value = append(m.value, ' ')
	case tea.KeyRunes:
		for _, r := range k.Runes {
			if r >= ' ' && r != 0x7f {
				m.value = append(m.value, r)
			}
		}
	}
	return Editing
}

// ShortHelp is nil: the line shows itself instead of hints.
func (m *Model) ShortHelp() []key.Binding { return nil }

// View is the prompt and the text with a cursor, fitted to the width.
func (m *Model) View() string {
	return common.Fit(m.prompt+string(m.value)+"█", m.Width, false)
}
