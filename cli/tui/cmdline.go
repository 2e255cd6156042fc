package tui

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
)

// lineEditor is the one-line input of `/` and `:`. (bubbles' textinput
// blinks its cursor on a timer, which makes frames depend on time.)
type lineEditor struct {
	prompt string
	value  []rune
}

// editResult says what a key did to the line.
type editResult int

const (
	editing editResult = iota
	editDone
	editCancelled
)

func (e *lineEditor) reset(prompt, value string) {
	e.prompt, e.value = prompt, []rune(value)
}

func (e *lineEditor) String() string { return string(e.value) }

// handle applies one key.
func (e *lineEditor) handle(k tea.KeyMsg) editResult {
	switch k.Type {
	case tea.KeyEnter:
		return editDone
	case tea.KeyEsc, tea.KeyCtrlC:
		return editCancelled
	case tea.KeyBackspace, tea.KeyCtrlH:
		if len(e.value) == 0 {
			return editCancelled // backspace on an empty line leaves it, as in vim
		}
		e.value = e.value[:len(e.value)-1]
	case tea.KeyCtrlU:
		e.value = e.value[:0]
	case tea.KeySpace:
		e.value = append(e.value, ' ')
	case tea.KeyRunes:
		for _, r := range k.Runes {
			if r >= ' ' && r != 0x7f {
				e.value = append(e.value, r)
			}
		}
	}
	return editing
}

func (e *lineEditor) view() string { return e.prompt + string(e.value) + "█" }

// commands lists what `:` understands, for the help screen and errors.
var commands = []struct{ name, help string }{
	{"allocs", "the allocations view"},
	{"nodes", "the nodes view (operators)"},
	{"create", "the create wizard"},
	{"release [ID]", "release the selection (or ID)"},
	{"ssh [ID]", "shell on the selection (or ID)"},
	{"filter TEXT", "only matching rows (none: all)"},
	{"all", "also released and failed ones"},
	{"recent", "live and recently finished ones"},
	{"refresh", "re-read everything now"},
	{"help", "this screen"},
	{"q", "quit"},
}

// runCommand runs one `:` line.
func (m *Model) runCommand(line string) tea.Cmd {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil
	}
	arg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), fields[0]))
	switch fields[0] {
	case "q", "quit", "exit", "q!", "wq":
		return tea.Quit
	case "nodes", "node":
		return m.showNodes()
	case "allocs", "alloc", "allocations":
		m.view = viewAllocs
		return nil
	case "create", "new":
		return m.openWizard()
	case "release", "rm":
		return m.askRelease(arg)
	case "ssh":
		return m.startSSH(arg)
	case "filter":
		m.setFilter(arg)
		return nil
	case "all":
		m.showAll = true
		m.rebuildRows()
		return nil
	case "recent":
		m.showAll = false
		m.rebuildRows()
		return nil
	case "refresh", "r":
		return m.refreshAll()
	case "help", "h":
		m.mode = modeHelp
		return nil
	}
	m.setError(fmt.Errorf("unknown command %q: try :help", fields[0]))
	return nil
}
