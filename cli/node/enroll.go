package node

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// EnrollOptions are the inputs of `gpuaas node enroll`.
type EnrollOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Name  string
	Shape string
	// TestNode enrolls a test node: its slices may pass the driver check
	// with simulated GPUs (docs/slices.md, "Test nodes").
	TestNode bool
}

// NewCmdEnroll builds `gpuaas node enroll`; runF replaces enrollRun in tests.
func NewCmdEnroll(f *cmdutil.Factory, runF func(context.Context, *EnrollOptions) error) *cobra.Command {
	opts := &EnrollOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "enroll --name NAME [--shape gpu_slice|baremetal] [--test-node]",
		Short: "Make a one-time token that lets a new GPU host join",
		Long: `Make a one-time enrollment token for a new GPU host. Start hostd on the host
with it; hostd generates its key, registers once (the token is then spent)
and discovers its GPUs. The discovered slots wait for
` + "`gpuaas node slots approve NAME`" + `.

The token is printed once and expires after an hour.

--test-node enrolls a test node, for CI and staging hosts without real GPUs:
the driver check that runs in every slice guest before it is billed accepts
simulated GPUs (UUIDs starting ` + api.SimGPUUUIDPrefix + `) from a test node's slices,
and refuses them from every other node. The flag is recorded with the token
in the audit log and cannot be changed after enrollment (enroll the host
again under another name). Only gpu_slice nodes have the driver check.`,
		Example: `  gpuaas node enroll --name gpu-017 --shape gpu_slice
  gpuaas node enroll --name ci-slice-1 --shape gpu_slice --test-node
  gpuaas hostd --server nats://control:4222 --state-dir /var/lib/gpuaas/hostd --token "$TOKEN"`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Name == "" {
				return cmdutil.FlagErrorf("--name is required")
			}
			if !api.KnownShape(opts.Shape) {
				return cmdutil.FlagErrorf("--shape must be %s, got %q", api.ShapeList(), opts.Shape)
			}
			if opts.TestNode && !api.DriverChecked(opts.Shape) {
				return cmdutil.FlagErrorf("--test-node is for %s nodes (the slice guests' driver check), not --shape %s",
					strings.Join(slices.DeleteFunc(api.Shapes(), func(s string) bool { return !api.DriverChecked(s) }), " or "), opts.Shape)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return enrollRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "Name of the new node (required)")
	cmd.Flags().StringVar(&opts.Shape, "shape", api.DefaultShape, "What the node is rented as: "+api.ShapeList())
	cmd.Flags().BoolVar(&opts.TestNode, "test-node", false, "Enroll a test node: its slices may pass the driver check with simulated GPUs")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.EnrollTokenResponse{}))
	return cmd
}

func enrollRun(ctx context.Context, opts *EnrollOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	tok, err := client.NodeEnroll(ctx, api.EnrollTokenRequest{Name: opts.Name, Shape: opts.Shape, Test: opts.TestNode})
	if err != nil {
		return err
	}
	if opts.TestNode {
		fmt.Fprintf(opts.IO.ErrOut, "%s is a TEST node: its slices pass the driver check with simulated GPUs; never enroll renters' hardware this way\n", tok.Name)
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, tok)
	}
	if !opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintln(opts.IO.Out, tok.Token)
		return err
	}
	fmt.Fprintf(opts.IO.Out, "Enrollment token for %s (%s), valid until %s:\n\n  %s\n\n", tok.Name, tok.Shape,
		tok.ExpiresAt.Local().Format("15:04 MST"), tok.Token)
	fmt.Fprintf(opts.IO.ErrOut, "On the host: gpuaas hostd --server <nats-url> --state-dir /var/lib/gpuaas/hostd --token %s\n", tok.Token)
	return nil
}
