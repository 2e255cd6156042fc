package catalog

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ListOptions are the inputs of `gpuaas catalog list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
	// Available keeps only the SKUs that can be rented now.
	Available bool
}

// NewCmdList builds `gpuaas catalog list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the SKUs on offer",
		Long: `List the SKUs on offer: their shape (a whole baremetal node or a
gpu_slice VM), GPU model, the GPU counts you can ask for, the price per
GPU-hour, and what the fleet can serve now: the GPUs free (for baremetal,
those of wholly free nodes) and the ready nodes able to serve the SKU.

A SKU with no node is on offer but nothing can serve it: a request for it
can only wait in line (--queue) until an operator adds a host. With
--available, only the SKUs that can be rented now (at their smallest GPU
count) are listed.
` + cmdutil.PipedHelp("sku", "shape", "gpu", "counts (comma-separated)", "price per GPU-hour ($3.50)", "free gpus (a number)", "nodes (a number)"),
		Example: `  gpuaas catalog list
  gpuaas catalog list --available
  gpuaas catalog list --json id,availability --jq '.[] | select(.availability.nodes == 0) | .id'`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Available, "available", false, "Only the SKUs that can be rented now")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.SKU{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.CatalogList(ctx)
	if err != nil {
		return err
	}
	skus := resp.SKUs
	if opts.Available {
		skus = slices.DeleteFunc(skus, func(s api.SKU) bool { return !rentableNow(s) })
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, skus)
	}
	if len(skus) == 0 && opts.Available && opts.IO.IsStdoutTTY() {
		fmt.Fprintln(opts.IO.ErrOut, "Nothing can be rented now; `gpuaas catalog list` shows every SKU, and `alloc create --queue` waits for one")
		return nil
	}
	return printSKUs(opts.IO, skus)
}

// rentableNow reports whether a SKU's smallest GPU count fits in the GPUs
// free now. It is a summary, not a promise: a slice also wants its GPUs on
// one node, and `alloc create --dry-run` says where a request would go.
func rentableNow(s api.SKU) bool {
	if s.Availability == nil || len(s.GPUCounts) == 0 {
		return false
	}
	return s.Availability.FreeGPUs >= slices.Min(s.GPUCounts)
}

func printSKUs(ios *cmdutil.IOStreams, skus []api.SKU) error {
	if len(skus) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "The catalog is empty")
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("sku", "shape", "gpu", "counts", "price/gpu-hr", "free gpus", "nodes")
	var unserved []string
	for _, s := range skus {
		for _, f := range []string{s.ID, s.Shape, s.GPUModel, joinInts(s.GPUCounts), api.FormatMoney(s.PricePerGPUHourMinor, s.Currency)} {
			t.AddField(f)
		}
		addAvailability(t, ios, s)
		t.EndRow()
		if s.Availability != nil && s.Availability.Nodes == 0 {
			unserved = append(unserved, s.ID)
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if len(unserved) > 0 && ios.IsStdoutTTY() {
		fmt.Fprintf(ios.ErrOut, "\nNo host serves %s now: a request can only wait in line (--queue). "+
			"`gpuaas catalog list --available` lists what can be rented now.\n", strings.Join(unserved, ", "))
	}
	return nil
}

// addAvailability adds the free-GPUs and nodes fields: numbers when
// piped; on a terminal, words where they help (a SKU no host serves) and
// colour: green when it can be rented now.
func addAvailability(t *cmdutil.TablePrinter, ios *cmdutil.IOStreams, s api.SKU) {
	av := s.Availability
	if av == nil {
		t.AddField("")
		t.AddField("")
		return
	}
	free, nodes := strconv.Itoa(av.FreeGPUs), strconv.Itoa(av.Nodes)
	cs := ios.ColorScheme()
	switch {
	case !ios.IsStdoutTTY():
		t.AddField(free)
		t.AddField(nodes)
	case av.Nodes == 0:
		t.AddField("-", cmdutil.WithColor(cs.Gray))
		t.AddField("none", cmdutil.WithColor(cs.Yellow))
	case !rentableNow(s):
		t.AddField(free, cmdutil.WithColor(cs.Yellow))
		t.AddField(nodes)
	default:
		t.AddField(free, cmdutil.WithColor(cs.Green))
		t.AddField(nodes)
	}
}

func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
