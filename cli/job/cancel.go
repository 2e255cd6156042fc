package job

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CancelOptions are the inputs of `gpuaas job cancel`.
type CancelOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)

	ID string
}

// NewCmdCancel builds `gpuaas job cancel`; runF replaces cancelRun in
// tests.
func NewCmdCancel(f *cmdutil.Factory, runF func(context.Context, *CancelOptions) error) *cobra.Command {
	opts := &CancelOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "End a running job",
		Long: `End a running job: its processes get SIGTERM, then SIGKILL after a grace
period, and the job becomes cancelled (follow it with ` + "`gpuaas job wait ID`" + `).
A queued job (run --queue --detach) is cancelled at once and its
allocation released (it leaves the line; nothing was charged), unless its
release is keep.`,
		Args: cmdutil.ExactArgs(1, "a job ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return cancelRun(c.Context(), opts)
		},
	}
	return cmd
}

func cancelRun(ctx context.Context, opts *CancelOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	j, err := client.JobCancel(ctx, opts.ID)
	if err != nil {
		return err
	}
	if j.State == api.JobCancelled { // it was queued: it never started
		fmt.Fprintf(opts.IO.ErrOut, "job %s: cancelled before it started (its allocation %s left the line unless release: keep)\n", j.ID, j.AllocationID)
		return nil
	}
	fmt.Fprintf(opts.IO.ErrOut, "job %s: cancelling (SIGTERM, then SIGKILL)\n", j.ID)
	return nil
}
