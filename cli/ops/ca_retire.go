package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CARetireOptions are the inputs of `gpuaas ops ca retire`.
type CARetireOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	CA  string
	Key string
	Yes bool
}

// NewCmdCARetire builds `gpuaas ops ca retire`; runF replaces caRetireRun in tests.
func NewCmdCARetire(f *cmdutil.Factory, runF func(context.Context, *CARetireOptions) error) *cobra.Command {
	opts := &CARetireOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "retire --ca user|host|internal --key FINGERPRINT [--yes]",
		Short: "Stop trusting a CA key; its certificates are refused from now on",
		Long: `Retire a CA key: it is no longer trusted anywhere, so every certificate it
signed is refused from the next connection on, and its private half is
erased. A CA's only key cannot be retired. Retiring the active key hands
signing back to the most recently active of the others.

On a terminal you are asked to confirm unless --yes is given.`,
		Example: `  gpuaas ops ca list --ca user
  gpuaas ops ca retire --ca user --key SHA256:2pC0...`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkCA(opts.CA, false); err != nil {
				return err
			}
			if opts.Key == "" {
				return cmdutil.FlagErrorf("--key is required (see `gpuaas ops ca list`)")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return caRetireRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.CA, "ca", "", "The CA: user, host or internal (required)")
	cmd.Flags().StringVar(&opts.Key, "key", "", "Fingerprint of the key to retire (required)")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.CAKey{}))
	return cmd
}

func caRetireRun(ctx context.Context, opts *CARetireOptions) error {
	if !opts.Yes && opts.IO.CanPrompt() {
		ok, err := opts.IO.Confirm(ctx, fmt.Sprintf("Retire %s of the %s CA? Certificates it signed stop working.", opts.Key, opts.CA))
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
	resp, err := client.CARetire(ctx, api.CARotateRequest{CA: opts.CA, KeyID: opts.Key})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Keys)
	}
	return printKeys(opts.IO, opts.Now(), resp.Keys)
}
