package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DrainOptions are the inputs of `gpuaas node drain`.
type DrainOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Node string
	// Wait waits until no allocation and no attached volume or volume
	// session is on the node; Timeout bounds it (0: no bound), Poll is
	// how often it looks (DefaultDrainPoll).
	Wait    bool
	Timeout time.Duration
	Poll    time.Duration
}

// NewCmdDrain builds `gpuaas node drain`; runF replaces drainRun in tests.
func NewCmdDrain(f *cmdutil.Factory, runF func(context.Context, *DrainOptions) error) *cobra.Command {
	opts := &DrainOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "drain NODE",
		Short: "Stop placing new allocations on a node",
		Long: `Stop placing new allocations on a node. Allocations already on it keep
running until they are released, and so do the volumes attached to them or
open in an sftp session: the drain names them. With --wait it waits until
none is left (printing what it waits for), so the node can be serviced;
--timeout bounds the wait. Volumes that are merely kept on the node stay on
its disk (they are node-local): see docs/volumes.md, "Draining a node".`,
		Args: cmdutil.ExactArgs(1, "a node name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Node = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return drainRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "Wait until no allocation, attached volume or volume session is left on the node")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "With --wait, give up after this long (0: wait until done)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Node{}))
	return cmd
}

func drainRun(ctx context.Context, opts *DrainOptions) error {
	if opts.Timeout < 0 || (opts.Timeout > 0 && !opts.Wait) {
		return cmdutil.FlagErrorf("--timeout needs --wait and a duration above 0, got %s", opts.Timeout)
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	n, err := client.NodeDrain(ctx, opts.Node)
	switch {
	case err == nil:
		fmt.Fprintf(opts.IO.ErrOut, "Node %s is %s\n", n.Name, n.State)
	case opts.Wait && errors.Is(err, api.ErrConflict) && strings.Contains(err.Error(), "already draining"):
		fmt.Fprintf(opts.IO.ErrOut, "Node %s is already draining\n", opts.Node)
	default:
		return err
	}
	var d *api.NodeDetail
	if opts.Wait {
		if d, err = waitDrained(ctx, opts, client, opts.Node); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "Node %s holds no allocation, attached volume or volume session: it can be serviced", d.Node.Name)
		if k := stays(d); k > 0 {
			fmt.Fprintf(opts.IO.ErrOut, " (its %d volume(s) stay on its disk: do not wipe it)", k)
		}
		fmt.Fprintln(opts.IO.ErrOut)
	} else {
		if d, err = client.NodeGet(ctx, opts.Node); err != nil {
			return err
		}
		printHolds(opts.IO, d)
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, &d.Node)
	}
	return printNodes(opts.IO, opts.Now(), []api.Node{d.Node})
}
