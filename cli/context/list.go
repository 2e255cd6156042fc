package context

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/fuzzytime"
)

// Entry is one context as `gpuaas context list` shows it. It never holds
// the session token.
type Entry struct {
	Name string `json:"name"`
	// Current is the context commands run against (the file's current
	// context unless --context or GPUAAS_CONTEXT names another).
	Current        bool      `json:"current"`
	Server         string    `json:"server"`
	User           string    `json:"user"`
	Project        string    `json:"project"`
	Gateway        string    `json:"gateway"`
	LoggedIn       bool      `json:"logged_in"`
	TokenExpiresAt time.Time `json:"token_expires_at"`
}

// ListOptions are the inputs of `gpuaas context list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Config   func() (*clientconfig.Config, error)
	Active   func() (clientconfig.Active, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
}

// NewCmdList builds `gpuaas context list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Config: f.Config, Active: f.Active, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the contexts in the config",
		Long:    "List the contexts in the config file; the current one is marked.",
		Args:    cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(Entry{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	active, err := opts.Active()
	if err != nil {
		return err
	}
	now := opts.Now()
	entries := make([]Entry, 0, len(cfg.Contexts))
	for _, name := range cfg.ContextNames() {
		c, _ := cfg.Context(name)
		entries = append(entries, Entry{Name: name, Current: name == active.Name, Server: c.Server, User: c.User,
			Project: c.Project, Gateway: c.Gateway, LoggedIn: c.Token != "" && now.Before(c.TokenExpiresAt),
			TokenExpiresAt: c.TokenExpiresAt})
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, entries)
	}
	return printEntries(opts.IO, now, entries)
}

func printEntries(ios *cmdutil.IOStreams, now time.Time, entries []Entry) error {
	if len(entries) == 0 && ios.IsStdoutTTY() {
		_, err := ios.ErrOut.Write([]byte("No contexts; add one with `gpuaas context add NAME --server URL`\n"))
		return err
	}
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("", "name", "server", "user", "project", "session")
	for _, e := range entries {
		mark, color := "", func(s string) string { return s }
		if e.Current {
			mark, color = "*", cs.Green
		}
		t.AddField(mark, cmdutil.WithColor(color))
		t.AddField(e.Name, cmdutil.WithColor(color))
		t.AddField(e.Server)
		t.AddField(e.User)
		t.AddField(e.Project)
		t.AddField(session(ios, now, e))
		t.EndRow()
	}
	return t.Render()
}

// session says whether the context is logged in, and until when.
func session(ios *cmdutil.IOStreams, now time.Time, e Entry) string {
	switch {
	case e.TokenExpiresAt.IsZero() && !e.LoggedIn:
		return "-"
	case !e.LoggedIn:
		return "expired"
	case ios.IsStdoutTTY():
		return "until " + fuzzytime.Ago(now, e.TokenExpiresAt)
	}
	return e.TokenExpiresAt.UTC().Format(time.RFC3339)
}
