package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DropOptions are the inputs of `gpuaas ops outbox drop`.
type DropOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	ID  int64
	Yes bool
}

// NewCmdDrop builds `gpuaas ops outbox drop`; runF replaces dropRun in tests.
func NewCmdDrop(f *cmdutil.Factory, runF func(context.Context, *DropOptions) error) *cobra.Command {
	opts := &DropOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "drop ID [--yes]",
		Short: "Give up on a dead outbox event: it is never published",
		Long: `Drop a dead outbox event: it is never published, so whoever it concerned is
never told of that change (their state is still right: ` + "`gpuaas alloc get`" + `
and the other reads show it). The row stays, as dropped, next to the audit
row saying who dropped it. Admins only.

On a terminal you are asked to confirm; elsewhere --yes is required.`,
		Example: `  gpuaas ops outbox drop 4212 --yes`,
		Args:    cmdutil.ExactArgs(1, "an outbox event id"),
		RunE: func(c *cobra.Command, args []string) error {
			var err error
			if opts.ID, err = parseID(args[0]); err != nil {
				return err
			}
			if !opts.Yes && !opts.IO.CanPrompt() {
				return cmdutil.FlagErrorf("drop gives up on an event for good: pass --yes to confirm (there is no terminal to ask on)")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return dropRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.OutboxEvent{}))
	return cmd
}

func dropRun(ctx context.Context, opts *DropOptions) error {
	if !opts.Yes {
		ok, err := opts.IO.Confirm(ctx, fmt.Sprintf("Drop outbox event %d? It is never published.", opts.ID))
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
	e, err := client.OutboxDrop(ctx, api.OutboxRef{ID: opts.ID})
	if err != nil {
		return err
	}
	return printChanged(ctx, opts.IO, opts.Exporter, opts.Now(), e, "Dropped outbox event %d (%s)\n")
}
