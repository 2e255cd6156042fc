package tui

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/tui/help"
)

// commands lists what `:` understands, for the help screen and errors.
var commands = []help.Command{
	{Name: "allocs", Help: "the allocations view"},
	{Name: "nodes", Help: "the nodes view (operators)"},
	{Name: "jobs", Help: "the project's jobs; enter: log"},
	{Name: "create", Help: "the create wizard"},
	{Name: "release [ID]", Help: "release the selection (or ID)"},
	{Name: "ssh [ID]", Help: "shell on the selection (or ID)"},
	{Name: "app [ID]", Help: "run a published app on the selection"},
	{Name: "filter TEXT", Help: "only matching rows (none: all)"},
	{Name: "all", Help: "also released and failed ones"},
	{Name: "recent", Help: "live and recently finished ones"},
	{Name: "refresh", Help: "re-read everything now"},
	{Name: "help", Help: "this screen"},
	{Name: "q", Help: "quit"},
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
	case "jobs", "job":
		return m.showJobs()
	case "app", "apps":
		return m.openApps(arg)
	case "filter":
		m.table.SetFilter(arg)
		return nil
	case "all":
		m.table.SetShowAll(true)
		return nil
	case "recent":
		m.table.SetShowAll(false)
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
