package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RunOptions are the inputs of `gpuaas app run`.
type RunOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Image      string
	File       string // an app manifest (app.yaml), instead of Image
	Allocation string
	SKU        string // rent an allocation of this SKU first, instead of Allocation
	Name       string
	Command    []string
	Env        map[string]string
	GPUs       int   // with Allocation, how many of its GPUs (0: all); with SKU, the allocation's size
	NoGPUs     bool  // the container gets no GPU (--gpus 0, a manifest's gpus: 0)
	ShmBytes   int64 // /dev/shm's size (a manifest's shm_size)
	Readiness  *api.WorkloadProbe
	Mounts     []api.AppMount // a manifest's mounts (manifest.go)
	Detach     bool
	Timeout    time.Duration
	DryRun     bool // print the price line (rundry.go), create nothing
}

// NewCmdRun builds `gpuaas app run`; runF replaces runRun in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IOStreams, Client: f.Client}
	var env []string
	var ready readyFlags
	cmd := &cobra.Command{
		Use:   "run {IMAGE | -f app.yaml} {--alloc ID | --sku SKU} [--gpus N] [--ready-http PORT/PATH | --ready-tcp PORT] [--name NAME] [-e NAME=VALUE]... [-- COMMAND ARGS...]",
		Short: "Run a catalog image as a container on an allocation",
		Long: `Run IMAGE, a catalog image (its name or id; promoted and verified, your
project's own or the platform's), as a container on the bare-metal allocation
--alloc, as the allocation's user with rootless podman. The node pulls the
image by digest once and keeps it; later runs of the same digest there skip
the pull. After --, COMMAND and its arguments replace the image's entrypoint
and command. Environment values are never shown again, only their names.

With -f, the app manifest app.yaml (docs/apps.md) gives the image (a catalog
name, or REPOSITORY@sha256:… of a catalog image), the name, the command and
its args, the environment (-e adds to it and wins), the GPU count, the
shared-memory size and the readiness probe; its ports are where the app
listens on the allocation (reach them with ssh -L). A manifest is read
strictly: an unknown key, a tag without a digest, a port outside 1024-65535
is refused naming the field, and nothing is sent. Its mounts bind volumes
attached to the allocation into the container (read-only with read_only:
true); a volume not attached to it is refused naming mounts[i].volume. With
--sku, the allocation is rented with the mounts' volumes attached.

The container gets the allocation's GPUs, all of them, its first N with
--gpus N, or none with --gpus 0 (or the manifest's gpus: N; --gpus wins);
more than it has is refused naming gpus. Its GPU-seconds are its own GPUs
× its running time.

With a readiness probe (--ready-http PORT/PATH: an HTTP GET answering 2xx
or 3xx; --ready-tcp PORT: a TCP connect; or the manifest's readiness), made
by the node on the allocation's loopback, the workload stays starting until
the probe passes, then runs; not ready --start-deadline (default 5m) after
its container started, it is failed with the probe's last error and its
last lines, and its container is stopped.

With --sku instead of --alloc, an allocation of that SKU (--gpus GPUs, or
the manifest's gpus: N, or the SKU's one size) is rented first, as job run
rents one: its price line, then a wait until it is active (Ctrl-C releases
it); the container gets all of its GPUs. If the workload cannot be created
the allocation is released at once; otherwise it is yours: it stays, and is
charged, until ` + "`gpuaas alloc release ID`" + `, which stops and removes its workloads.

Without --detach, print the container's output as it comes while waiting
until the workload runs (is ready, with a probe) (or, once it ended, until its last line: exit 1 when
it failed), then print the workload (` + "`gpuaas app logs -f ID`" + ` follows the rest);
with --detach, print its id at once.

With --dry-run, print the price per hour and create nothing: the
allocation's (what --alloc is charged, or what --sku would rent) plus the
app's own price per hour, which operators set on platform apps
(docs/apps.md, "Prices"), as "SKU (N GPU(s)) $X/h + app NAME $Y/h = $Z/h";
--json gives the numbers (allocation_price_per_hour_minor,
app_price_per_hour_minor, price_per_hour_minor).`,
		Example: `  gpuaas app run tiny --alloc a-123
  gpuaas app run tiny --alloc a-123 --name web -e PORT=8080 -- /bin/httpd -f -p 8080
  gpuaas app run -f app.yaml --alloc a-123
  gpuaas app run tiny --alloc a-123 --ready-http 8080/healthz --start-deadline 2m -- /bin/httpd -f -p 8080
  gpuaas app run jupyter --sku h100-baremetal -d
  gpuaas app run jupyter --alloc a-123 --dry-run`,
		Args: func(c *cobra.Command, args []string) error {
			dash := c.ArgsLenAtDash()
			if opts.File != "" {
				if len(args) > 0 {
					return cmdutil.FlagErrorf("give either IMAGE or -f app.yaml, and the command in the manifest")
				}
				return nil
			}
			if (dash < 0 && len(args) != 1) || dash > 1 || (dash == 0) {
				return cmdutil.FlagErrorf("give one IMAGE (see `gpuaas image list`), then -- and a command if you want one")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if opts.File == "" {
				opts.Image = args[0]
			}
			if dash := c.ArgsLenAtDash(); dash == 1 {
				opts.Command = args[1:]
				if len(opts.Command) == 0 {
					return cmdutil.FlagErrorf("nothing after --: give a command, or leave -- out")
				}
			}
			switch {
			case opts.Allocation == "" && opts.SKU == "":
				return cmdutil.FlagErrorf("--alloc ID (the allocation to run on) or --sku SKU (rent one first) is required")
			case opts.Allocation != "" && opts.SKU != "":
				return cmdutil.FlagErrorf("--alloc and --sku together: give one, not both")
			}
			if c.Flags().Changed("gpus") && (opts.GPUs < 0 || (opts.GPUs == 0 && opts.SKU != "")) {
				return cmdutil.FlagErrorf("invalid --gpus %d: want 0 (none, with --alloc) or more (leave it out for all of the allocation's)", opts.GPUs)
			}
			opts.NoGPUs = c.Flags().Changed("gpus") && opts.GPUs == 0
			if opts.Timeout < 0 {
				return cmdutil.FlagErrorf("invalid --timeout %s: want a positive duration", opts.Timeout)
			}
			for _, e := range env {
				k, v, ok := strings.Cut(e, "=")
				if !ok || k == "" {
					return cmdutil.FlagErrorf("invalid -e %q: want NAME=VALUE", e)
				}
				if opts.Env == nil {
					opts.Env = map[string]string{}
				}
				opts.Env[k] = v
			}
			if opts.File != "" {
				// Read before anything is sent: a refused manifest
				// changes nothing.
				req, _, err := manifestRequest(opts.File)
				if err != nil {
					return err
				}
				opts.Image, opts.Command = req.Image, req.Command
				opts.ShmBytes, opts.Readiness = req.ShmBytes, req.Readiness
				opts.Mounts = req.Mounts
				if !c.Flags().Changed("gpus") { // with --sku, the size to rent
					opts.GPUs, opts.NoGPUs = req.GPUs, req.NoGPUs
				}
				if opts.Name == "" {
					opts.Name = req.Name
				}
				for k, v := range opts.Env {
					if req.Env == nil {
						req.Env = map[string]string{}
					}
					req.Env[k] = v
				}
				opts.Env = req.Env
			}
			if err := ready.apply(c, opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "Run the app manifest `app.yaml` (docs/apps.md)")
	cmd.Flags().StringVar(&opts.Allocation, "alloc", "", "The allocation to run on")
	cmd.Flags().StringVar(&opts.SKU, "sku", "", "Rent an allocation of this `SKU` first and run on it (gpuaas catalog lists them)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "The workload's name, unique on the allocation (default: the image's)")
	cmd.Flags().StringArrayVarP(&env, "env", "e", nil, "Set NAME=VALUE in the container (repeatable)")
	cmd.Flags().IntVar(&opts.GPUs, "gpus", 0, "With --alloc: the container gets its first N GPUs (default: all); with --sku: the GPUs to rent")
	ready.add(cmd)
	cmd.Flags().BoolVarP(&opts.Detach, "detach", "d", false, "Print the workload's id and return at once")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "Print the price per hour (the allocation's + the app's own); create nothing")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "Give up waiting after this long (exit 21)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, runFields())
	return cmd
}

// runFields are the workload's JSON fields, then those only --dry-run's
// RunQuote has.
func runFields() []string {
	fields := cmdutil.FieldsOf(api.Workload{})
	for _, f := range cmdutil.FieldsOf(RunQuote{}) {
		if !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	return fields
}

func runRun(ctx context.Context, opts *RunOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	if strings.Contains(opts.Image, "@sha256:") { // a manifest's pinned reference
		if opts.Image, err = catalogImage(ctx, client, opts.Image); err != nil {
			return err
		}
	}
	if opts.DryRun {
		return quoteRun(ctx, opts, client)
	}
	gpus, release := opts.GPUs, func() {}
	if opts.SKU != "" {
		if opts.Allocation, release, err = rentForApp(ctx, opts, client); err != nil {
			return err
		}
		gpus = 0 // all of the allocation rented for it
	}
	w, err := client.AppRun(ctx, api.AppRunRequest{Image: opts.Image, AllocationID: opts.Allocation, Name: opts.Name,
		Command: opts.Command, Env: opts.Env, GPUs: gpus, NoGPUs: opts.NoGPUs, ShmBytes: opts.ShmBytes, Readiness: opts.Readiness,
		Mounts: opts.Mounts})
	if err != nil {
		release()
		return err
	}
	if opts.SKU != "" {
		rentedNote(opts.IO, opts.Allocation)
	}
	if opts.Detach {
		if opts.Exporter != nil {
			return opts.Exporter.Write(ctx, opts.IO, w)
		}
		fmt.Fprintln(opts.IO.Out, w.ID)
		return nil
	}
	fmt.Fprintf(opts.IO.ErrOut, "workload %s (%s) on %s: %s%s\n", w.ID, w.Name, w.AllocationID, w.State, readyNote(opts))
	w, err = streamStarted(ctx, opts.IO, opts.Exporter != nil, client, w.ID, opts.Timeout)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		err = opts.Exporter.Write(ctx, opts.IO, w)
	} else {
		err = printWorkload(opts.IO, w)
	}
	if err == nil && w.State == api.WorkloadFailed {
		return &cmdutil.CodedError{Code: cmdutil.ExitError, Err: fmt.Errorf("workload %s failed: %s", w.ID, api.SanitizeText(w.Reason))}
	}
	return err
}

// streamStarted prints the workload's output as it comes (app.logs,
// followed) until it runs, or, once it ended, until its last line: then
// it returns the workload as it is.
func streamStarted(ctx context.Context, ios *cmdutil.IOStreams, toErr bool, client *api.Client, id string, timeout time.Duration) (*api.Workload, error) {
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	out := ios
	if toErr { // stdout is for the workload's JSON
		c := *ios
		c.Out = ios.ErrOut
		out = &c
	}
	state := api.WorkloadPending
	print := func(l api.LogLine) error { return cmdutil.PrintLogLine(ctx, out, nil, l) }
	_, err := cmdutil.FollowLogs(wctx, appLogs(client, id), cmdutil.LogRequest{}, true, print, func(s string) bool {
		state = s
		return s == api.WorkloadRunning
	})
	if err != nil {
		if wctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return nil, &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout, Err: fmt.Errorf("workload %s: still %s after %s", id, state, timeout)}
		}
		return nil, err
	}
	return client.AppGet(ctx, id)
}
