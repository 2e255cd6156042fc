package catalog

import (
	"context"
	"fmt"
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
}

// NewCmdList builds `gpuaas catalog list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the SKUs on offer",
		Long: `List the SKUs on offer: their shape (a whole baremetal node or a
gpu_slice VM), GPU model, the GPU counts you can ask for, and the price per
GPU-hour.`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
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
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.SKUs)
	}
	return printSKUs(opts.IO, resp.SKUs)
}

func printSKUs(ios *cmdutil.IOStreams, skus []api.SKU) error {
	if len(skus) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "The catalog is empty")
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("sku", "shape", "gpu", "counts", "price/gpu-hr")
	for _, s := range skus {
		t.AddRow(s.ID, s.Shape, s.GPUModel, joinInts(s.GPUCounts), api.FormatMoney(s.PricePerGPUHourMinor, s.Currency))
	}
	return t.Render()
}

func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
