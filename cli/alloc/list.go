package alloc

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

var allocStates = []string{
	api.AllocRequested, api.AllocProvisioning, api.AllocActive, api.AllocReleasing,
	api.AllocReleased, api.AllocFailed, api.AllocReleaseFailed,
}

// ListOptions are the inputs of `gpuaas alloc list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	State string
	All   bool
}

// NewCmdList builds `gpuaas alloc list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your allocations, newest first",
		Long: `List the allocations of all your projects, or of the project -p/--project
names, newest first, each with its project. Released and failed allocations
are left out unless --all is given.` + cmdutil.PipedHelp(listPiped...),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.State != "" && !slices.Contains(allocStates, opts.State) {
				return cmdutil.FlagErrorf("invalid --state %q: want one of %v", opts.State, allocStates)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.State, "state", "", "Only allocations in this state")
	cmd.Flags().BoolVar(&opts.All, "all", false, "Include released and failed allocations")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Allocation{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.AllocList(ctx, api.AllocListRequest{State: opts.State, All: opts.All})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Allocations)
	}
	return printAllocations(opts.IO, opts.Now(), resp.Allocations)
}
