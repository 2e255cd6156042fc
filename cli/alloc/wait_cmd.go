package alloc

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// WaitOptions are the inputs of `gpuaas alloc wait`.
type WaitOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	ID      string
	For     string
	Timeout time.Duration
}

// waitTargets are the states `alloc wait --for` accepts.
var waitTargets = []string{api.AllocActive, api.AllocReleased}

// NewCmdWait builds `gpuaas alloc wait`; runF replaces waitRun in tests.
func NewCmdWait(f *cmdutil.Factory, runF func(context.Context, *WaitOptions) error) *cobra.Command {
	opts := &WaitOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "wait ID [--for active|released] [--timeout D]",
		Short: "Wait until an allocation is active or released",
		Long: `Wait until an allocation reaches a state, following its phases on stderr,
then print it.

Only the phases of the operation that leads there are shown (provisioning
for active, the release for released), each once, in order, with the final
state line last. An allocation already in the state prints its state alone:
` + "`gpuaas alloc get`" + ` shows its whole timeline.

It follows your event stream and re-reads the allocation now and then, so it
returns as soon as the change happens. The exit code tells scripts how it
ended:

   0  the allocation reached the state
  20  it cannot get there any more: it failed (the reason is printed), or it
      was released (or is being released) while waiting for active
  21  --timeout passed first

See ` + "`gpuaas help exit-codes`" + ` for the other codes.`,
		Example: `  gpuaas alloc wait a-4f2k9x --for active --timeout 10m
  gpuaas alloc release a-4f2k9x --yes && gpuaas alloc wait a-4f2k9x --for released
  id=$(gpuaas alloc create --sku h200-slice --gpus 1 --json id --jq .id) && gpuaas alloc wait "$id"`,
		Args: cmdutil.ExactArgs(1, "an allocation ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if !slices.Contains(waitTargets, opts.For) {
				return cmdutil.FlagErrorf("--for must be active or released, got %q", opts.For)
			}
			if opts.Timeout <= 0 {
				return cmdutil.FlagErrorf("--timeout must be positive, got %s", opts.Timeout)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return waitRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.For, "for", api.AllocActive, "State to wait for: active or released")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "How long to wait before giving up (exit 21)")
	_ = cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions(waitTargets, cobra.ShellCompDirectiveNoFileComp))
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Allocation{}))
	return cmd
}

func waitRun(ctx context.Context, opts *WaitOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	a, err := waitFor(ctx, opts.IO, client, opts.ID, opts.Timeout, opts.For)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, a)
	}
	return printAllocation(opts.IO, opts.Now(), a)
}
