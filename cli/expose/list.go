package expose

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ListOptions are the inputs of `gpuaas expose list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
	Request  api.ExposeListRequest
}

// NewCmdList builds `gpuaas expose list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list [--alloc ALLOC]",
		Aliases: []string{"ls"},
		Short:   "List the project's live exposures",
		Long: "List the project's exposures that still serve: not removed, expired or released." +
			cmdutil.PipedHelp("id", "url", "share", "allocation", "port", "name", "expires (RFC 3339)"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Request.Allocation, "alloc", "", "Only this allocation's")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Exposure{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	l, err := client.ExposeList(ctx, opts.Request)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, l.Exposures)
	}
	if len(l.Exposures) == 0 && opts.IO.IsStdoutTTY() {
		_, err := opts.IO.ErrOut.Write([]byte("No exposures\n"))
		return err
	}
	t := cmdutil.NewTablePrinter(opts.IO)
	t.AddHeader("id", "url", "share", "allocation", "port", "name", "expires")
	for _, e := range l.Exposures {
		where := e.URL
		if where == "" {
			where = e.Host
		}
		t.AddRow(e.ID, where, e.Share, e.AllocationID, strconv.Itoa(e.Port), e.Name,
			cmdutil.FormatTime(opts.IO, opts.Now(), e.ExpiresAt))
	}
	return t.Render()
}
