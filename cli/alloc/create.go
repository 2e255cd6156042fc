package alloc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clip"
	"github.com/gpuaas/gpuaas/internal/suggest"
)

// CreateOptions are the inputs of `gpuaas alloc create`.
type CreateOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	SKU   string
	GPUs  int // 0: take the SKU's only count
	Queue bool
	// IdleReleaseAfter and MaxDuration are the allocation's idle policy
	// ("30m", "off"; "" the project's) and maximum duration.
	IdleReleaseAfter string
	MaxDuration      string
	IdempotencyKey   string
	Wait             bool
	Timeout          time.Duration
	// CancelOnTimeout releases the request when --timeout passes before
	// it is active.
	CancelOnTimeout bool
	DryRun          bool
	// Volumes are the project's volumes to mount (--volume NAME[:/path]).
	Volumes     []api.VolumeMount
	volumeFlags []string
}

// NewCmdCreate builds `gpuaas alloc create`; runF replaces createRun in tests.
func NewCmdCreate(f *cmdutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "create --sku SKU [--gpus N] [--queue]",
		Short: "Rent a GPU node or slice",
		Long: `Request an allocation of a SKU in the current project.

--gpus may be left out for a baremetal SKU that comes in one size; otherwise
it is required. With --queue, a request that cannot be placed now waits for
capacity (first come, first served per SKU) instead of failing with
no_capacity.

With --wait, it follows the provisioning phase by phase on stderr (a
spinner on a terminal, plain lines otherwise) and returns once the
allocation is active, exiting 20 if it fails (with the reason) and 21 if
--timeout passes first. Neither running out of time nor interrupting the
wait (Ctrl-C, exit 130) cancels the request: a queued request stays in
line and is placed (and charged) when capacity frees. The command says
what is left behind (still queued, and where in line, or provisioning)
and how to release it. With --cancel-on-timeout, a request that is not
active when --timeout passes is released instead (still exit 21).

The project's balance must last a minimum runway (controld's
--min-runway, 10 minutes by default) at its total burn: what its
allocations already cost per hour plus this one. Otherwise the create is
refused with insufficient_funds (exit 10; top up with
` + "`gpuaas billing topup`" + `). A queued request is checked again when it is
placed, and fails with that reason if the project can no longer pay.

With --dry-run, nothing is created: it checks the request exactly as a
create would, and reports the price per hour, whether it fits now (or its
place in line with --queue), and how long the project's balance lasts at
its total burn with this allocation (what ` + "`gpuaas billing balance`" + `
counts, plus this one), and whether the balance is too low to create it.

Retrying with the same --idempotency-key never allocates twice.`,
		Example: `  gpuaas alloc create --sku h100-slice --gpus 2
  gpuaas alloc create --sku h100-baremetal --queue
  gpuaas alloc create --sku h100-slice --gpus 1 --json id --jq .id
  gpuaas alloc create --sku h200-slice --gpus 4 --dry-run`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.SKU == "" {
				return cmdutil.FlagErrorf("--sku is required (see `gpuaas catalog list`)")
			}
			if c.Flags().Changed("gpus") && opts.GPUs <= 0 {
				return cmdutil.FlagErrorf("--gpus must be at least 1, got %d", opts.GPUs)
			}
			if opts.DryRun && opts.Wait {
				return cmdutil.FlagErrorf("--dry-run creates nothing to --wait for")
			}
			if opts.CancelOnTimeout && !opts.Wait {
				return cmdutil.FlagErrorf("--cancel-on-timeout needs --wait (and --timeout)")
			}
			if err := parseVolumeFlags(opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return createRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.SKU, "sku", "", "SKU to rent (required)")
	cmd.Flags().IntVar(&opts.GPUs, "gpus", 0, "Number of GPUs (default: the SKU's only size)")
	cmd.Flags().BoolVar(&opts.Queue, "queue", false, "Wait in line for capacity instead of failing")
	cmd.Flags().StringVar(&opts.IdleReleaseAfter, "idle-release-after", "", "Release it after this long without activity (e.g. 30m; off; default: the project's policy)")
	cmd.Flags().StringVar(&opts.MaxDuration, "max-duration", "", "Release it this long after it became active, whatever its activity (e.g. 8h)")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Key that makes retries safe (default: random)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "Wait until the allocation is active, showing its phases")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "With --wait: how long to wait")
	cmd.Flags().BoolVar(&opts.CancelOnTimeout, "cancel-on-timeout", false, "With --wait: release the request if it is not active when --timeout passes")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "Report price, fit and balance runway; create nothing")
	cmd.Flags().StringArrayVar(&opts.volumeFlags, "volume", nil, "Mount a volume of the project, NAME[:/path] (default /data/NAME; bare metal; repeatable)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, createFields())
	return cmd
}

func createRun(ctx context.Context, opts *CreateOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	gpus := opts.GPUs
	if gpus == 0 {
		if gpus, err = defaultGPUs(ctx, client, opts.SKU); err != nil {
			return err
		}
	}
	req := api.AllocCreateRequest{SKU: opts.SKU, GPUs: gpus, Queue: opts.Queue,
		IdleReleaseAfter: opts.IdleReleaseAfter, MaxDuration: opts.MaxDuration, Volumes: opts.Volumes}
	if opts.DryRun {
		return quoteRun(ctx, opts, client, req)
	}
	key := mutationKey(opts.IdempotencyKey)
	a, err := client.AllocCreate(ctx, req, api.WithIdempotencyKey(key))
	if err != nil {
		return withRetryKey(err, key)
	}
	if a.Note != "" {
		fmt.Fprintf(opts.IO.ErrOut, "Note: allocation %s: %s\n", a.ID, a.Note)
	}
	if opts.Wait {
		created := a
		if a, err = waitForOperation(ctx, opts.IO, client, a.ID, opts.Timeout, api.AllocActive); err != nil {
			switch {
			case errors.Is(err, context.Canceled):
				tellLeftBehind(ctx, opts.IO, client, created)
				return err
			case cmdutil.ExitCodeOf(err) != cmdutil.ExitWaitTimeout:
				return err
			}
			if a, err = createTimedOut(ctx, opts, client, created); err != nil {
				return err
			}
		}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, a)
	}
	return printAllocation(opts.IO, opts.Now(), a)
}

// defaultGPUs is the GPU count of a baremetal SKU sold in one size.
func defaultGPUs(ctx context.Context, client *api.Client, sku string) (int, error) {
	cat, err := client.CatalogList(ctx)
	if err != nil {
		return 0, err
	}
	s, ok := findSKU(cat.SKUs, sku)
	if !ok {
		ids := make([]string, len(cat.SKUs))
		for i, s := range cat.SKUs {
			ids[i] = s.ID
		}
		return 0, &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("no SKU %q in the catalog%s", clip.String(sku), suggest.DidYouMean(sku, ids)),
			Hint: "see `gpuaas catalog list`"}
	}
	return gpusFor(s)
}

func findSKU(skus []api.SKU, id string) (api.SKU, bool) {
	for _, s := range skus {
		if s.ID == id {
			return s, true
		}
	}
	return api.SKU{}, false
}

// gpusFor picks the count when --gpus was left out: only a baremetal SKU
// with a single size has an obvious one.
func gpusFor(s api.SKU) (int, error) {
	if s.WholeNode() && len(s.GPUCounts) == 1 {
		return s.GPUCounts[0], nil
	}
	counts := make([]string, len(s.GPUCounts))
	for i, n := range s.GPUCounts {
		counts[i] = strconv.Itoa(n)
	}
	return 0, cmdutil.FlagErrorf("--gpus is required for %s SKU %s (one of %s)", s.Shape, s.ID, strings.Join(counts, ", "))
}

// tellLeftBehind says, when a wait was interrupted (Ctrl-C), what became of
// the allocation: interrupting the wait does not cancel the request, and
// a queued one would otherwise sit in line, to be placed and charged
// later, with no word about it. The state is read afresh, since the
// request may have been placed meanwhile; the create's answer stands in
// when the server does not answer at once.
func tellLeftBehind(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, a *api.Allocation) {
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if now, err := client.AllocGet(readCtx, a.ID); err == nil {
		a = now
	}
	what, pending := leftBehind(a)
	if !pending {
		return
	}
	fmt.Fprintf(ios.ErrOut, "\nAllocation %s %s.\nCancel it with `gpuaas alloc release %s`.\n", a.ID, what, a.ID)
}
