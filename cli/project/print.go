package project

import (
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// printProjects prints projects as a table; the context's default project
// is highlighted on a terminal.
func printProjects(ios *cmdutil.IOStreams, now time.Time, current string, projects []api.Project) error {
	if len(projects) == 0 && ios.IsStdoutTTY() {
		_, err := ios.ErrOut.Write([]byte("No projects\n"))
		return err
	}
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("name", "id", "role", "created")
	for _, p := range projects {
		var opts []cmdutil.FieldOption
		if current != "" && (p.Name == current || p.ID == current) {
			opts = append(opts, cmdutil.WithColor(cs.Green))
		}
		t.AddField(p.Name, opts...)
		t.AddField(p.ID)
		t.AddField(p.Role)
		t.AddField(cmdutil.FormatTime(ios, now, p.CreatedAt))
		t.EndRow()
	}
	return t.Render()
}

// printMembers prints a project's members as a table.
func printMembers(ios *cmdutil.IOStreams, now time.Time, members []api.Member) error {
	if len(members) == 0 && ios.IsStdoutTTY() {
		_, err := ios.ErrOut.Write([]byte("No members\n"))
		return err
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("email", "role", "user id", "added")
	for _, m := range members {
		t.AddRow(m.Email, m.Role, m.UserID, cmdutil.FormatTime(ios, now, m.AddedAt))
	}
	return t.Render()
}
