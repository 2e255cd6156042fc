package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ReleaseOptions are the inputs of `gpuaas alloc release`.
type ReleaseOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	ID      string
	Force   bool
	Reason  string
	Yes     bool
	Wait    bool
	Timeout time.Duration
	// IdempotencyKey makes a retried release return the first reply.
	IdempotencyKey string
}

// NewCmdRelease builds `gpuaas alloc release`; runF replaces releaseRun in tests.
func NewCmdRelease(f *cmdutil.Factory, runF func(context.Context, *ReleaseOptions) error) *cobra.Command {
	opts := &ReleaseOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "release ID [--yes]",
		Short: "Give an allocation back and stop paying for it",
		Long: `Release an allocation: its VM or user is removed and its GPUs are wiped
and freed. On a terminal you are asked to confirm unless --yes is given.

--force (operators) releases from any state that is not final.

With --wait, it follows the release phase by phase on stderr and returns
once the allocation is released and its GPUs are free, exiting 20 if the
release fails and 21 if --timeout passes first.

Billing stops when the release is asked for: the final partial window is
charged at once and what the allocation cost is printed on stderr.

Releasing an allocation whose provisioning failed is accepted and changes
nothing: its cleanup is already queued (or done), as the message says.

Retrying with the same --idempotency-key returns the first release's
reply instead of a conflict, and never releases twice.`,
		Args: cmdutil.ExactArgs(1, "an allocation ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return releaseRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "Release from any non-final state (operators)")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why, for the audit log")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Key that makes retries safe (default: random)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "Wait until the allocation is released")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "With --wait: how long to wait")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Allocation{}))
	return cmd
}

func releaseRun(ctx context.Context, opts *ReleaseOptions) error {
	if !opts.Yes && opts.IO.CanPrompt() {
		ok, err := opts.IO.Confirm(ctx, fmt.Sprintf("Release allocation %s?", opts.ID))
		if err != nil {
			return err
		}
		if !ok {
			return cmdutil.ErrCancelled
		}
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	stay := volumesStaying(ctx, client, opts.ID)
	key := mutationKey(opts.IdempotencyKey)
	a, err := client.AllocRelease(ctx, api.AllocReleaseRequest{ID: opts.ID, Force: opts.Force, Reason: opts.Reason},
		api.WithIdempotencyKey(key))
	if err != nil {
		return withRetryKey(err, key)
	}
	if a.Note != "" {
		// Nothing was left to release (the platform's cleanup has it);
		// there is no release to wait for either.
		fmt.Fprintln(opts.IO.ErrOut, cmdutil.SafeLines(a.Note))
	}
	if stay != "" && a.Note == "" {
		fmt.Fprintln(opts.IO.ErrOut, stay)
	}
	if opts.Wait && a.Note == "" {
		if a, err = waitForOperation(ctx, opts.IO, client, a.ID, opts.Timeout, api.AllocReleased); err != nil {
			return err
		}
	}
	if a.Usage != nil && a.Usage.StoppedAt != nil {
		// Billing stopped at the release request: the cost is final.
		fmt.Fprintf(opts.IO.ErrOut, "Allocation %s cost %s\n", a.ID, describeCost(a.Usage))
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, a)
	}
	return printAllocation(opts.IO, opts.Now(), a)
}
