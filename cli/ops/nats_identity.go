package ops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

func newCmdNATSIdentity(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nats-identity <command>",
		Short: "Register, list and revoke the NATS keys of gateways and operators",
		Long: `sshgate and operators' natscli connect to NATS with an nkey whose public
half controld knows. add makes the key here (the seed never leaves this
machine), registers its public key and writes the seed to --out. A
gateway key lets sshgate connect and log in to controld; an operator key
lets natscli monitor the NATS servers read-only:

  nats --server URL --nkey FILE server list

Rotate by adding a second key under the same name, deploying it, then
revoking the old one; revoke closes the key's connections at once.`,
	}
	cmd.AddCommand(NewCmdNATSIdentityAdd(f, nil), NewCmdNATSIdentityList(f, nil), NewCmdNATSIdentityRevoke(f, nil))
	return cmd
}

// NATSIdentityAddOptions are the inputs of `gpuaas ops nats-identity add`.
type NATSIdentityAddOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Kind  string
	Name  string
	Out   string
	Force bool
}

// NewCmdNATSIdentityAdd builds `gpuaas ops nats-identity add`.
func NewCmdNATSIdentityAdd(f *cmdutil.Factory, runF func(context.Context, *NATSIdentityAddOptions) error) *cobra.Command {
	opts := &NATSIdentityAddOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "add --kind gateway|operator --name NAME --out FILE",
		Short: "Make a NATS key, register it and write its seed to a file",
		Example: `  gpuaas ops nats-identity add --kind gateway --name sshgate-1 --out /etc/gpuaas/sshgate.nk
  gpuaas ops nats-identity add --kind operator --name alice --out ~/.config/gpuaas/alice-ops.nk`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Kind != api.BusIdentityGateway && opts.Kind != api.BusIdentityOperator {
				return cmdutil.FlagErrorf("--kind must be gateway or operator, got %q", opts.Kind)
			}
			if opts.Name == "" || opts.Out == "" {
				return cmdutil.FlagErrorf("--name and --out are required")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return natsIdentityAddRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Kind, "kind", "", "gateway (sshgate) or operator (natscli, read-only monitoring)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "Name of the key's holder, e.g. sshgate-1")
	cmd.Flags().StringVar(&opts.Out, "out", "", "File to write the seed to (0600)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "Overwrite --out if it exists")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.BusIdentity{}))
	return cmd
}

func natsIdentityAddRun(ctx context.Context, opts *NATSIdentityAddOptions) error {
	if _, err := os.Stat(opts.Out); err == nil && !opts.Force {
		return cmdutil.FlagErrorf("%s exists: --force overwrites it", opts.Out)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	// The seed is on disk before the key is registered: a key nobody holds
	// must never be trusted.
	if err := fsutil.WriteFile(opts.Out, append(seed, '\n'), 0o600, fsutil.Durable); err != nil {
		return err
	}
	id, err := client.BusIdentityAdd(ctx, api.BusIdentityAddRequest{PublicKey: pub, Kind: opts.Kind, Name: opts.Name})
	if err != nil {
		_ = os.Remove(opts.Out)
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, id)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Registered %s key %s for %s; its seed is in %s.\n", id.Kind, id.PublicKey, id.Name, opts.Out)
	return nil
}

// NATSIdentityListOptions are the inputs of `gpuaas ops nats-identity list`.
type NATSIdentityListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
}

// NewCmdNATSIdentityList builds `gpuaas ops nats-identity list`.
func NewCmdNATSIdentityList(f *cmdutil.Factory, runF func(context.Context, *NATSIdentityListOptions) error) *cobra.Command {
	opts := &NATSIdentityListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the registered NATS keys, revoked ones too",
		Args:  cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return natsIdentityListRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.BusIdentity{}))
	return cmd
}

func natsIdentityListRun(ctx context.Context, opts *NATSIdentityListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	ids, err := client.BusIdentityList(ctx)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, ids)
	}
	if len(ids) == 0 && opts.IO.IsStdoutTTY() {
		fmt.Fprintln(opts.IO.ErrOut, "No keys")
		return nil
	}
	cs := opts.IO.ColorScheme()
	t := cmdutil.NewTablePrinter(opts.IO)
	t.AddHeader("name", "kind", "key", "state", "created")
	for _, id := range ids {
		t.AddField(id.Name)
		t.AddField(id.Kind)
		t.AddField(id.PublicKey)
		if id.RevokedAt != nil {
			t.AddField("revoked", cmdutil.WithColor(cs.Gray))
		} else {
			t.AddField("active", cmdutil.WithColor(cs.Green))
		}
		t.AddField(cmdutil.FormatTime(opts.IO, opts.Now(), id.CreatedAt))
		t.EndRow()
	}
	return t.Render()
}

// NATSIdentityRevokeOptions are the inputs of `gpuaas ops nats-identity revoke`.
type NATSIdentityRevokeOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Ref string
}

// NewCmdNATSIdentityRevoke builds `gpuaas ops nats-identity revoke`.
func NewCmdNATSIdentityRevoke(f *cmdutil.Factory, runF func(context.Context, *NATSIdentityRevokeOptions) error) *cobra.Command {
	opts := &NATSIdentityRevokeOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "revoke <public-key|name>",
		Short: "Revoke a NATS key (or every key of a name) and close its connections",
		Args:  cmdutil.ExactArgs(1, "a public key (U…) or a name"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Ref = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return natsIdentityRevokeRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.BusIdentity{}))
	return cmd
}

func natsIdentityRevokeRun(ctx context.Context, opts *NATSIdentityRevokeOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	req := api.BusIdentityRevokeRequest{Name: opts.Ref}
	if nkeys.IsValidPublicUserKey(opts.Ref) {
		req = api.BusIdentityRevokeRequest{PublicKey: opts.Ref}
	}
	resp, err := client.BusIdentityRevoke(ctx, req)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Revoked)
	}
	for _, id := range resp.Revoked {
		fmt.Fprintf(opts.IO.ErrOut, "Revoked %s key %s of %s; its connections are being closed.\n", id.Kind, id.PublicKey, id.Name)
	}
	return nil
}
