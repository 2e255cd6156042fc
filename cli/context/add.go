package context

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/trust"
)

// AddOptions are the inputs of `gpuaas context add`.
type AddOptions struct {
	IO     *cmdutil.IOStreams
	Config func() (*clientconfig.Config, error)
	Now    func() time.Time

	Name      string
	Server    string
	Gateway   string
	Project   string
	ServerKey string
	Use       bool
	// CAFile is the server's CA certificate(s), stored in the context.
	CAFile string
	// InsecurePlaintext allows plaintext to a server on another machine.
	InsecurePlaintext bool
}

// NewCmdAdd builds `gpuaas context add`; runF replaces addRun in tests.
func NewCmdAdd(f *cmdutil.Factory, runF func(*AddOptions) error) *cobra.Command {
	opts := &AddOptions{IO: f.IOStreams, Config: f.Config, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "add NAME --server URL",
		Short: "Add a server to the config",
		Long: `Add a context called NAME for the server at URL (NATS: nats://, tls://,
ws:// or wss://; several URLs of one cluster separated by commas). The first
context added becomes the current one; --use makes this one current too.
Then log in to it with ` + "`gpuaas login --context NAME`" + `.

A server on another machine is reached over TLS: --ca stores the CA
certificate(s) its certificate must chain to in the context (without it,
the system's roots). gpuaas refuses plaintext to a server that is not on
this machine unless --insecure-plaintext says otherwise: your session
token is the connection's credential.

--server-key pins controld's server key (its SHA256 fingerprint, as your
operator or ` + "`gpuaas context trust`" + ` on a trusted machine shows it) before
the first login, which then refuses any server that does not hold it.
Without it the first login pins the key it is shown (see ` + "`gpuaas context trust`" + `).`,
		Example: `  gpuaas context add prod --server tls://gpuaas.example.com:4222 --ca prod-ca.pem --gateway gpuaas.example.com:22 --use
  gpuaas context add lab --server tls://10.0.0.5:4222 --ca lab-ca.pem --project ml
  gpuaas context add prod --server tls://gpuaas.example.com:4222 --server-key SHA256:2pC0...`,
		Args: cmdutil.ExactArgs(1, "a context name"),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Name = args[0]
			if err := validName(opts.Name); err != nil {
				return err
			}
			if opts.Server == "" {
				return cmdutil.FlagErrorf("--server is required")
			}
			if err := validServer(opts.Server); err != nil {
				return err
			}
			if opts.Gateway != "" {
				if err := validGateway(opts.Gateway); err != nil {
					return err
				}
			}
			if opts.ServerKey != "" {
				if err := trust.ValidServerKey(opts.ServerKey); err != nil {
					return cmdutil.FlagErrorf("--server-key: %v", err)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return addRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Server, "server", "", "NATS URL of the server (required)")
	cmd.Flags().StringVar(&opts.Gateway, "gateway", "", "SSH gateway `host:port` (default: what the server publishes)")
	cmd.Flags().StringVar(&opts.Project, "project", "", "Project this context pins: sent with every command, it wins over your default project")
	cmd.Flags().StringVar(&opts.ServerKey, "server-key", "", "Pin the server's key (`SHA256:fingerprint` or ssh-ed25519 key) before the first login")
	cmd.Flags().BoolVar(&opts.Use, "use", false, "Make it the current context")
	cmd.Flags().StringVar(&opts.CAFile, "ca", "", "PEM file of the CA(s) the server's TLS certificate chains to (stored in the context)")
	cmd.Flags().BoolVar(&opts.InsecurePlaintext, "insecure-plaintext", false, "Allow plaintext to a server that is not on this machine (never across a network you do not control)")
	return cmd
}

func addRun(opts *AddOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	if _, ok := cfg.Context(opts.Name); ok {
		return &api.Error{Code: api.CodeConflict, Message: fmt.Sprintf("context %q already exists in %s", opts.Name, cfg.Path()),
			Hint: fmt.Sprintf("remove it first (`gpuaas context remove %s`) or pick another name", opts.Name)}
	}
	c := clientconfig.Context{Server: opts.Server, Gateway: opts.Gateway, Project: opts.Project, NATSInsecurePlaintext: opts.InsecurePlaintext}
	if opts.CAFile != "" {
		caPEM, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return cmdutil.FlagErrorf("--ca: %v", err)
		}
		if _, err := x509.ParseCertificate(firstPEMBlock(caPEM)); err != nil {
			return cmdutil.FlagErrorf("--ca %s holds no PEM certificate: %v", opts.CAFile, err)
		}
		c.NATSCA = string(caPEM)
	}
	if opts.ServerKey != "" {
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		c.Trust = &clientconfig.Trust{ServerKey: opts.ServerKey, PinnedAt: now().UTC()}
	}
	cfg.SetContext(opts.Name, c)
	if opts.Use {
		if err := cfg.UseContext(opts.Name); err != nil {
			return err
		}
	}
	if err := cfg.Save(); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Added context %s (%s)\n", opts.Name, opts.Server)
	if cfg.CurrentContext == opts.Name {
		fmt.Fprintf(opts.IO.ErrOut, "Current context is now %s; log in with `gpuaas login`\n", opts.Name)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "Log in with `gpuaas login --context %s`\n", opts.Name)
	}
	return nil
}

// firstPEMBlock is the DER of the first PEM block in data (nil if none).
func firstPEMBlock(data []byte) []byte {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil
	}
	return b.Bytes
}
