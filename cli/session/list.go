package session

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ListOptions are the inputs of `gpuaas session list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	AllocID  string
	VolumeID string
}

// NewCmdList builds `gpuaas session list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your SSH sessions through the gateway, newest first",
		Long: `List your SSH sessions through the gateway, newest first: shells, commands,
sftp and port forwards. Sessions with a terminal were recorded; play one
with ` + "`gpuaas session play ID`" + `.

A session is running, ended, or interrupted: the gateway serving it
stopped without ending it (a crash), and ended it when it started again,
keeping what it had recorded.

An sftp session to a volume (` + "`sftp <volume-id>@gateway`" + `, ` + "`gpuaas volume cp`" + `
and ` + "`volume sync`" + `) is listed with the volume's id where the others have an
allocation's; it ends interrupted when it was ended for it (the node
reported it gone, or it was taken over after 12 hours). Its bytes are not
counted (0).` +
			cmdutil.PipedHelp("id", "alloc (or volume)", "kind", "state", "started (RFC 3339)", "duration", "bytes", "exit", "recorded"),
		Example: `  gpuaas session list
  gpuaas session list --alloc a-7k2m9x4q1c
  gpuaas session list --volume vol-7k2m9x4q1c
  gpuaas session list --json id,exit_status`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.AllocID, "alloc", "", "Only sessions on this allocation `ID`")
	cmd.Flags().StringVar(&opts.VolumeID, "volume", "", "Only sftp sessions to this volume `ID`")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.TerminalSession{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.SessionList(ctx, api.SessionListRequest{AllocationID: opts.AllocID, VolumeID: opts.VolumeID})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Sessions)
	}
	return printSessions(opts.IO, opts.Now(), resp.Sessions)
}

var listHeader = []string{"id", "alloc", "kind", "state", "started", "duration", "bytes", "exit", "recorded"}

func printSessions(ios *cmdutil.IOStreams, now time.Time, sessions []api.TerminalSession) error {
	if len(sessions) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "No sessions")
		return nil
	}
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader(listHeader...)
	for _, s := range sessions {
		t.AddField(s.ID)
		if s.VolumeID != "" {
			t.AddField(s.VolumeID)
		} else {
			t.AddField(s.AllocationID)
		}
		t.AddField(s.Kind)
		switch s.State {
		case api.SessionRunning:
			t.AddField(s.State, cmdutil.WithColor(cs.Yellow))
		case api.SessionInterrupted:
			t.AddField(s.State, cmdutil.WithColor(cs.Red))
		default:
			t.AddField(s.State)
		}
		t.AddField(cmdutil.FormatTime(ios, now, s.StartedAt))
		if s.EndedAt == nil {
			t.AddField("")
		} else {
			t.AddField(s.EndedAt.Sub(s.StartedAt).Round(time.Second).String())
		}
		t.AddField(strconv.FormatInt(s.Bytes, 10))
		switch {
		case s.ExitStatus == nil:
			t.AddField("")
		case *s.ExitStatus == 0:
			t.AddField("0", cmdutil.WithColor(cs.Green))
		default:
			t.AddField(strconv.Itoa(*s.ExitStatus), cmdutil.WithColor(cs.Red))
		}
		if s.Recording != "" {
			t.AddField("yes")
		} else {
			t.AddField("no")
		}
		t.EndRow()
	}
	return t.Render()
}
