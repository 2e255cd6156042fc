package ops

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GatewayKeyAddOptions are the inputs of `gpuaas ops gateway-key add`.
type GatewayKeyAddOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Name    string
	Key     string // authorized_keys line
	KeyFile string
}

// NewCmdGatewayKeyAdd builds `gpuaas ops gateway-key add`; runF replaces
// gatewayKeyAddRun in tests.
func NewCmdGatewayKeyAdd(f *cmdutil.Factory, runF func(context.Context, *GatewayKeyAddOptions) error) *cobra.Command {
	opts := &GatewayKeyAddOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "add NAME {KEY | --key-file FILE}",
		Short: "Register a gateway's key so controld certifies it as a gateway",
		Long: `Register KEY (an authorized_keys line, as in the gateway's
gateway_ed25519_key.pub) as the key of the gateway NAME. A name has one key
in use at a time: revoke the old one to replace it. A revoked key cannot
be registered again.`,
		Example: `  gpuaas ops gateway-key add sshgate-1 --key-file /var/lib/gpuaas/sshgate/gateway_ed25519_key.pub
  gpuaas ops gateway-key add sshgate-2 'ssh-ed25519 AAAAC3Nza...'`,
		Args: cmdutil.RangeArgs(1, 2, "a gateway name and its key"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if len(args) == 2 {
				opts.Key = args[1]
			}
			if (opts.Key == "") == (opts.KeyFile == "") {
				return cmdutil.FlagErrorf("give the key either as an argument or with --key-file")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return gatewayKeyAddRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.KeyFile, "key-file", "", "File holding the key (authorized_keys format); - reads stdin")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.GatewayKey{}))
	return cmd
}

func gatewayKeyAddRun(ctx context.Context, opts *GatewayKeyAddOptions) error {
	key := opts.Key
	switch opts.KeyFile {
	case "":
	case "-":
		s, err := opts.IO.ReadAll(ctx)
		if err != nil {
			return err
		}
		key = s
	default:
		b, err := os.ReadFile(opts.KeyFile)
		if err != nil {
			return err
		}
		key = string(b)
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	k, err := client.GatewayKeyAdd(ctx, api.GatewayKeyAddRequest{Name: opts.Name, PublicKey: strings.TrimSpace(key)})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, k)
	}
	return printGatewayKeys(opts.IO, opts.Now(), []api.GatewayKey{*k})
}
