package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ListOptions are the inputs of `gpuaas audit list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Filters
	Limit int
	After int64
}

// NewCmdList builds `gpuaas audit list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list [--since 1h] [--actor A] [--action X] [--target T] [--all]",
		Aliases: []string{"ls"},
		Short:   "List the latest audit rows matching the filters",
		Long: "List the latest audit rows (--limit, default 50) matching the filters, oldest first; " +
			"--after ID lists the rows after that one instead." +
			cmdutil.PipedHelp("id", "at (RFC 3339)", "actor", "action", "target", "project"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Limit < 1 || opts.Limit > api.AuditPageMax {
				return cmdutil.FlagErrorf("invalid --limit %d: want 1 to %d", opts.Limit, api.AuditPageMax)
			}
			if opts.After < 0 {
				return cmdutil.FlagErrorf("invalid --after %d", opts.After)
			}
			if _, err := opts.request(opts.Now()); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	opts.add(cmd)
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "How many rows at most")
	cmd.Flags().Int64Var(&opts.After, "after", 0, "List the rows after this id, oldest first")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.AuditRecord{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	req, err := opts.request(opts.Now())
	if err != nil {
		return err
	}
	req.Limit, req.After, req.Newest = opts.Limit, opts.After, opts.After == 0
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.AuditList(ctx, req)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Records)
	}
	if err := printRecords(opts.IO, opts.Now(), resp.Records); err != nil {
		return err
	}
	if resp.More && len(resp.Records) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "more rows follow: --after %d\n", resp.Records[len(resp.Records)-1].ID)
	}
	return nil
}

// printRecords prints audit rows as a table.
func printRecords(ios *cmdutil.IOStreams, now time.Time, recs []api.AuditRecord) error {
	if len(recs) == 0 && ios.IsStdoutTTY() {
		_, err := ios.ErrOut.Write([]byte("No audit rows\n"))
		return err
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("id", "at", "actor", "action", "target", "project")
	for _, r := range recs {
		actor := r.ActorName
		if actor == "" {
			actor = r.Actor
		}
		t.AddRow(fmt.Sprint(r.ID), cmdutil.FormatTime(ios, now, r.At), actor, r.Action, r.TargetType+":"+r.TargetID, r.Project)
	}
	return t.Render()
}
