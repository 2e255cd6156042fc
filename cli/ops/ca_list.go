package ops

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CAListOptions are the inputs of `gpuaas ops ca list`.
type CAListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	CA  string
	All bool
}

// NewCmdCAList builds `gpuaas ops ca list`; runF replaces caListRun in tests.
func NewCmdCAList(f *cmdutil.Factory, runF func(context.Context, *CAListOptions) error) *cobra.Command {
	opts := &CAListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list [--ca user|host|internal] [--all]",
		Aliases: []string{"ls"},
		Short:   "List the CAs' keys: the active one and the others still trusted",
		Args:    cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkCA(opts.CA, true); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return caListRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.CA, "ca", "", "Only this CA: user, host or internal")
	cmd.Flags().BoolVar(&opts.All, "all", false, "Include retired keys")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.CAKey{}))
	return cmd
}

func caListRun(ctx context.Context, opts *CAListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.CAList(ctx, api.CAListRequest{CA: opts.CA, Retired: opts.All})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Keys)
	}
	return printKeys(opts.IO, opts.Now(), resp.Keys)
}
