package ops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// NATSSetupOptions are the inputs of `gpuaas ops nats-setup`.
type NATSSetupOptions struct {
	IO *cmdutil.IOStreams

	Out       string
	Force     bool
	PrintOnly bool
}

// NATSConfigFile is the nats-server configuration part nats-setup writes
// beside the keys.
const NATSConfigFile = "gpuaas-auth.conf"

// NewCmdNATSSetup builds `gpuaas ops nats-setup`; runF replaces
// natsSetupRun in tests.
func NewCmdNATSSetup(f *cmdutil.Factory, runF func(context.Context, *NATSSetupOptions) error) *cobra.Command {
	opts := &NATSSetupOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "nats-setup --out DIR",
		Short: "Create the NATS trust model's keys and the servers' auth configuration",
		Long: `Create the keys of the NATS trust model in DIR (0700, each key 0600) and
the part of the nats-server configuration that goes with them,
DIR/` + NATSConfigFile + `. Nothing is sent anywhere; run it on a machine you trust.

  ` + bus.IssuerKeyFile + `    account key that signs the callout's user JWTs
  ` + bus.XKeyFile + `       curve key the servers encrypt callout requests to
  ` + bus.ControldKeyFile + `          controld's user in the GPUAAS account
  ` + bus.SystemKeyFile + `      controld's user in the SYS account (closes revoked connections)

Give DIR to every controld (--nats-keys, or GPUAAS_NATS_KEYS). Include
` + NATSConfigFile + ` in every nats-server's configuration (it holds public keys
only), next to your listen, TLS, JetStream and cluster settings:

  include ./` + NATSConfigFile + `

Every other connection is then decided by controld's auth callout: users
by their session token, hostd by its enrolled node key, sshgate and
operators by keys registered with ` + "`gpuaas ops nats-identity add`" + `.

Rotation: run nats-setup into a new directory, give the new directory to
controld and the new configuration to the servers (a reload: nats-server
--signal reload), then restart controld. Connections made before keep
their authorization until they reconnect.`,
		Example: `  gpuaas ops nats-setup --out /etc/gpuaas/nats
  gpuaas ops nats-setup --out /etc/gpuaas/nats --print   # the configuration of existing keys`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Out == "" {
				return cmdutil.FlagErrorf("--out is required")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return natsSetupRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "Directory for the keys and "+NATSConfigFile+" (required)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "Replace existing keys (every server and controld must then be updated)")
	cmd.Flags().BoolVar(&opts.PrintOnly, "print", false, "Print the configuration of the keys already in --out; create nothing")
	return cmd
}

func natsSetupRun(_ context.Context, opts *NATSSetupOptions) error {
	existing, err := bus.LoadKeys(opts.Out)
	switch {
	case opts.PrintOnly:
		if err != nil {
			return err
		}
		_, err := fmt.Fprint(opts.IO.Out, existing.Public().Config())
		return err
	case err == nil && !opts.Force:
		return cmdutil.FlagErrorf("%s already holds NATS keys: --print shows their configuration, --force replaces them", opts.Out)
	case err != nil && !errors.Is(err, bus.ErrNoKeys) && !opts.Force:
		return err
	}
	keys, err := bus.GenerateKeys()
	if err != nil {
		return err
	}
	if err := keys.Save(opts.Out); err != nil {
		return err
	}
	conf := filepath.Join(opts.Out, NATSConfigFile)
	if err := fsutil.WriteFile(conf, []byte(keys.Public().Config()), 0o644, fsutil.Durable); err != nil {
		return err
	}
	if err := os.Chmod(opts.Out, 0o700); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Wrote the NATS keys and %s to %s.\n", NATSConfigFile, opts.Out)
	fmt.Fprintf(opts.IO.ErrOut, "Include %s in each nats-server's configuration; give %s to controld (--nats-keys).\n", conf, opts.Out)
	return nil
}
