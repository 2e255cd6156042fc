package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// StopOptions are the inputs of `gpuaas app stop` and `gpuaas app rm`.
type StopOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)

	ID string
}

// NewCmdStop builds `gpuaas app stop`; runF replaces stopRun in tests.
func NewCmdStop(f *cmdutil.Factory, runF func(context.Context, *StopOptions) error) *cobra.Command {
	opts := &StopOptions{IO: f.IOStreams, Client: f.Client}
	return &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a running workload",
		Long: `Stop a running workload: its container's main process gets SIGTERM, then
SIGKILL after a grace period (10 s), and the workload becomes stopped. Its
container stays on the node until ` + "`gpuaas app rm`" + ` or the allocation's release.`,
		Args: cmdutil.ExactArgs(1, "a workload ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return stopRun(c.Context(), opts, false)
		},
	}
}

// NewCmdRm builds `gpuaas app rm`; runF replaces its run in tests.
func NewCmdRm(f *cmdutil.Factory, runF func(context.Context, *StopOptions) error) *cobra.Command {
	opts := &StopOptions{IO: f.IOStreams, Client: f.Client}
	return &cobra.Command{
		Use:     "rm ID",
		Aliases: []string{"remove"},
		Short:   "Remove a workload, stopping it first",
		Long: `Remove a workload: stop it if it runs and remove its container from the node.
Its name is free for a new workload at once; ` + "`gpuaas app ps --all`" + ` still lists it.`,
		Args: cmdutil.ExactArgs(1, "a workload ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return stopRun(c.Context(), opts, true)
		},
	}
}

func stopRun(ctx context.Context, opts *StopOptions, remove bool) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	if remove {
		w, err := client.AppRm(ctx, opts.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "workload %s (%s): removed\n", w.ID, w.Name)
		return nil
	}
	w, err := client.AppStop(ctx, opts.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "workload %s (%s): stopping (SIGTERM, then SIGKILL)\n", w.ID, w.Name)
	return nil
}
