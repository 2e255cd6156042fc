package ops

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CARotateOptions are the inputs of `gpuaas ops ca rotate`.
type CARotateOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	CA    string
	Stage bool
	Key   string
}

// NewCmdCARotate builds `gpuaas ops ca rotate`; runF replaces caRotateRun in tests.
func NewCmdCARotate(f *cmdutil.Factory, runF func(context.Context, *CARotateOptions) error) *cobra.Command {
	opts := &CARotateOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "rotate --ca user|host|internal [--stage | --key FINGERPRINT]",
		Short: "Give a CA a new signing key; the old one stays trusted",
		Long: `Add a key to a CA and sign with it from now on. The previous key stays
trusted, so certificates it signed keep working until you retire it.

With --stage the new key is trusted but does not sign yet: publish it first
(clients fetch the trusted keys with ` + "`gpuaas ssh-config`" + `), then activate it
with --key and its fingerprint. Activating an older trusted key with --key
also rolls a rotation back.`,
		Example: `  gpuaas ops ca rotate --ca user
  gpuaas ops ca rotate --ca host --stage
  gpuaas ops ca rotate --ca host --key SHA256:2pC0...`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkCA(opts.CA, false); err != nil {
				return err
			}
			if opts.Stage && opts.Key != "" {
				return cmdutil.FlagErrorf("--stage adds a new key and --key activates an existing one: pick one")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return caRotateRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.CA, "ca", "", "The CA: user, host or internal (required)")
	cmd.Flags().BoolVar(&opts.Stage, "stage", false, "Add a trusted key that does not sign yet")
	cmd.Flags().StringVar(&opts.Key, "key", "", "Make this trusted key (fingerprint) the signing key")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.CAKey{}))
	return cmd
}

func caRotateRun(ctx context.Context, opts *CARotateOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.CARotate(ctx, api.CARotateRequest{CA: opts.CA, Stage: opts.Stage, KeyID: opts.Key})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Keys)
	}
	return printKeys(opts.IO, opts.Now(), resp.Keys)
}
