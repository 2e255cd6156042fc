package alloc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Bounds of `gpuaas alloc top --interval`: hostd samples every 5 s by
// default, so polling faster than a second shows nothing new.
const (
	DefaultTopInterval = 2 * time.Second
	MinTopInterval     = time.Second
)

// TopOptions are the inputs of `gpuaas alloc top`.
type TopOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	ID       string
	Interval time.Duration
	// Count ends after that many refreshes; 0 runs until interrupted or
	// the allocation is released. Unset (CountSet false) with stdout not
	// a terminal, top prints one refresh: a pipe or a file gets a snapshot
	// and the command ends.
	Count    int
	CountSet bool
}

// TopRow is one GPU at one refresh: what --json prints, one object a line.
type TopRow struct {
	AllocationID string    `json:"allocation_id"`
	Time         time.Time `json:"time"`
	// Index is the GPU's position in the allocation (by PCI address).
	Index            int       `json:"index"`
	PCI              string    `json:"pci"`
	UUID             string    `json:"uuid"`
	UtilizationPct   *float64  `json:"utilization_pct"`
	MemoryUsedBytes  *uint64   `json:"memory_used_bytes"`
	MemoryTotalBytes *uint64   `json:"memory_total_bytes"`
	TemperatureC     *float64  `json:"temperature_c"`
	PowerW           *float64  `json:"power_w"`
	ECCUncorrected   *uint64   `json:"ecc_uncorrected"`
	SampledAt        time.Time `json:"sampled_at"`
}

// NewCmdTop builds `gpuaas alloc top`; runF replaces topRun in tests.
func NewCmdTop(f *cmdutil.Factory, runF func(context.Context, *TopOptions) error) *cobra.Command {
	opts := &TopOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "top ID",
		Short: "Watch the utilisation, memory, temperature, power and ECC errors of an allocation's GPUs",
		Long: `Watch the utilisation, memory, temperature, power and ECC errors of an
allocation's GPUs, as its node last read them (every few seconds).

On a terminal the table refreshes in place until you press q (or Ctrl-C).
Piped or redirected, it prints one refresh and ends, unless --count says
how many (--count 0: until interrupted), each appending its rows. Piped
rows are tab-separated without a header, in the columns of the table:
gpu, pci, util (%), memory used/total (GiB), temp (°C), power (W), ecc.
--json prints one JSON object per GPU per refresh (newline-delimited).
It also ends when the allocation is released.`,
		Example: `  gpuaas alloc top a-7k2m9x4q1c
  gpuaas alloc top a-7k2m9x4q1c --json --count 1
  gpuaas alloc top a-7k2m9x4q1c --json --count 0 | jq .utilization_pct`,
		Args: cmdutil.ExactArgs(1, "an allocation ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if opts.Interval < MinTopInterval {
				return cmdutil.FlagErrorf("--interval must be at least %s, got %s", MinTopInterval, opts.Interval)
			}
			if opts.Count < 0 {
				return cmdutil.FlagErrorf("--count must not be negative, got %d", opts.Count)
			}
			opts.CountSet = c.Flags().Changed("count")
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return topRun(c.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Interval, "interval", DefaultTopInterval, "Time between refreshes")
	cmd.Flags().IntVar(&opts.Count, "count", 0, "Stop after `N` refreshes (0: until interrupted or released; default 1 when piped, else 0)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(TopRow{}))
	return cmd
}

func topRun(ctx context.Context, opts *TopOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	// --json is newline-delimited even on a terminal: one object a line.
	jsonIO := *opts.IO
	jsonIO.SetStdoutTTY(false)
	count := opts.Count
	if !opts.CountSet && !opts.IO.IsStdoutTTY() {
		count = 1
	}
	quit, restore := quitKeys(opts.IO)
	defer restore()
	shown := 0
	for {
		top, err := client.AllocTop(ctx, opts.ID)
		switch {
		case shown > 0 && errors.Is(err, api.ErrConflict):
			fmt.Fprintf(opts.IO.ErrOut, "allocation %s is no longer active\n", opts.ID)
			return nil
		case shown > 0 && errors.Is(err, api.ErrUnavailable):
			fmt.Fprintf(opts.IO.ErrOut, "%s; retrying\n", err)
		case err != nil:
			return err
		default:
			if err := printTop(ctx, opts, &jsonIO, top); err != nil {
				return err
			}
		}
		shown++
		if count > 0 && shown >= count {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-quit:
			return nil
		case <-time.After(opts.Interval):
		}
	}
}

func printTop(ctx context.Context, opts *TopOptions, jsonIO *cmdutil.IOStreams, top *api.AllocTopResponse) error {
	now := opts.Now().UTC()
	if len(top.GPUs) == 0 {
		// A node that just started, or GPUs its nvidia-smi cannot see
		// (passed through to a VM on a real slice host).
		fmt.Fprintf(opts.IO.ErrOut, "no GPU telemetry for allocation %s yet\n", top.AllocationID)
		return nil
	}
	if opts.Exporter != nil {
		for _, g := range top.GPUs {
			row := TopRow{AllocationID: top.AllocationID, Time: now, Index: g.Index, PCI: g.PCI, UUID: g.UUID,
				UtilizationPct: g.UtilizationPct, MemoryUsedBytes: g.MemoryUsedBytes, MemoryTotalBytes: g.MemoryTotalBytes,
				TemperatureC: g.TemperatureC, PowerW: g.PowerW, ECCUncorrected: g.ECCUncorrected, SampledAt: g.At}
			if err := opts.Exporter.Write(ctx, jsonIO, row); err != nil {
				return err
			}
		}
		return nil
	}
	if opts.IO.IsStdoutTTY() {
		// Home and clear: the table refreshes in place.
		fmt.Fprint(opts.IO.Out, "\x1b[H\x1b[2J")
		fmt.Fprintf(opts.IO.Out, "%s  %s  every %s\n\n", top.AllocationID, now.Local().Format("15:04:05"), opts.Interval)
	}
	tp := cmdutil.NewTablePrinter(opts.IO)
	tp.AddHeader("gpu", "pci", "util", "memory", "temp", "power", "ecc")
	for _, g := range top.GPUs {
		tp.AddRow(strconv.Itoa(g.Index), g.PCI, pct(g.UtilizationPct), memory(g.MemoryUsedBytes, g.MemoryTotalBytes),
			unit(g.TemperatureC, "%.0f°C"), unit(g.PowerW, "%.0f W"), count(g.ECCUncorrected))
	}
	return tp.Render()
}

func pct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", *v)
}

func unit(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func count(v *uint64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatUint(*v, 10)
}

func memory(used, total *uint64) string {
	gib := func(v *uint64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(*v)/(1<<30))
	}
	if used == nil && total == nil {
		return "-"
	}
	return gib(used) + "/" + gib(total) + " GiB"
}
