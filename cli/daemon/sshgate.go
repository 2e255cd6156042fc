package daemon

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/alloc"
	"github.com/gpuaas/gpuaas/cli/auth"
	"github.com/gpuaas/gpuaas/cli/catalog"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/project"
	"github.com/gpuaas/gpuaas/cli/session"
	"github.com/gpuaas/gpuaas/cli/tui"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/sshgate"
)

// SSHGateOptions are the inputs of `gpuaas sshgate`.
type SSHGateOptions struct {
	IO           *cmdutil.IOStreams
	Listen       string
	Server       string
	TokenFile    string
	Token        string
	HostKey      string
	Advertise    string
	Principals   []string
	Name         string
	RecordingDir string
	LogLevel     string
}

// NewCmdSSHGate builds `gpuaas sshgate`.
func NewCmdSSHGate(f *cmdutil.Factory, runF func(context.Context, *SSHGateOptions) error) *cobra.Command {
	opts := &SSHGateOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:     "sshgate",
		Short:   "Run the SSH gateway",
		GroupID: "daemon",
		Long: `Run the SSH gateway users reach their allocations through:
ssh <allocation-id>@gateway opens a shell (or runs a command, sftp, scp,
ssh -L) on the allocation's node, and ssh gpuaas@gateway <command> runs
gpuaas commands.

Only user certificates from controld's user CA are accepted (gpuaas login
gets one). Each allocation session is authorized by controld, which hands
the gateway a one-minute ticket for the node; PTY sessions are recorded
(asciicast v2) into the terminal-recordings object store.

The gateway authenticates to controld with a service token of role
gateway (an admin issues it with ops.service_token). Its host key is
generated in --host-key (0600) on first start, and certified by
controld's host CA at every start, so clients with the @cert-authority line
from gpuaas ssh-config trust it without a prompt. Run as many replicas as
you like behind a TCP load balancer; they share nothing.

Nodes let the gateway in only with a gateway certificate as well as the
ticket. The gateway key is generated next to the host key on first start
(gateway_ed25519_key; its public half in gateway_ed25519_key.pub), and an
admin registers it once: gpuaas ops gateway-key add NAME --key-file
gateway_ed25519_key.pub. Until then the gateway serves commands but opens
no shells, and logs the command to run.

Environment: GPUAAS_NATS_URL and GPUAAS_SERVICE_TOKEN stand in for --server
and --token-file.`,
		Example: `  gpuaas sshgate --listen :22 --server nats://nats:4222 --token-file /etc/gpuaas/sshgate.token \
    --host-key /var/lib/gpuaas/sshgate/host_ed25519_key --advertise ssh.gpuaas.example:22`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Server = envOr(os.Getenv, "GPUAAS_NATS_URL", opts.Server)
			token, err := readServiceToken(opts.TokenFile, os.Getenv)
			if err != nil {
				return err
			}
			opts.Token = token
			if opts.HostKey == "" {
				return cmdutil.FlagErrorf("--host-key is required")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return sshgateRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Listen, "listen", ":2222", "Address to serve SSH on")
	fl.StringVar(&opts.Server, "server", "nats://127.0.0.1:4222", "NATS URL of the control plane")
	fl.StringVar(&opts.TokenFile, "token-file", "", "File holding the gateway's service token (default: $GPUAAS_SERVICE_TOKEN)")
	fl.StringVar(&opts.HostKey, "host-key", "/var/lib/gpuaas/sshgate/host_ed25519_key", "The gateway's ed25519 host key; generated (0600) when missing")
	fl.StringVar(&opts.Advertise, "advertise", "", "host:port users ssh to; its host is certified as a principal")
	fl.StringSliceVar(&opts.Principals, "principal", nil, "Host name to certify for the host key (repeatable; default: the --advertise host)")
	fl.StringVar(&opts.Name, "name", "", "Name of this gateway instance in the session index (default: the host name)")
	fl.StringVar(&opts.RecordingDir, "recording-dir", "", "Where recordings wait for upload, unlinked (default: the temp dir)")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "Log level: debug, info, warn, error")
	return cmd
}

// readServiceToken reads the token from file, else from
// GPUAAS_SERVICE_TOKEN.
func readServiceToken(file string, getenv func(string) string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read --token-file: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", cmdutil.FlagErrorf("--token-file %s is empty", file)
	}
	if t := strings.TrimSpace(getenv("GPUAAS_SERVICE_TOKEN")); t != "" {
		return t, nil
	}
	return "", cmdutil.FlagErrorf("a service token is required: --token-file or GPUAAS_SERVICE_TOKEN")
}

func sshgateRun(ctx context.Context, opts *SSHGateOptions) error {
	log, err := newLogger(opts.IO.ErrOut, opts.LogLevel)
	if err != nil {
		return err
	}
	name := opts.Name
	if name == "" {
		name, _ = os.Hostname()
	}
	nc, err := bus.Connect(opts.Server, "gpuaas-sshgate")
	if err != nil {
		return err
	}
	defer nc.Close()
	g, err := sshgate.New(sshgate.Config{
		Listen:       opts.Listen,
		HostKeyPath:  opts.HostKey,
		Advertise:    opts.Advertise,
		Principals:   opts.Principals,
		Name:         name,
		Client:       api.NewClient(nc, api.WithToken(opts.Token)),
		Commands:     SSHCommandTree,
		TUI:          tui.ServeSSH,
		RecordingDir: opts.RecordingDir,
		Log:          log,
	})
	if err != nil {
		return err
	}
	return g.Run(ctx)
}

// SSHCommandTree is the command tree `ssh gpuaas@gateway <command>`
// serves, built fresh for each session. It holds the commands that only
// talk to the API. Those that act on the local machine — login and logout
// (the config file), ssh and ssh-config (OpenSSH and its files) — and the
// daemons are left out: over SSH they would act on the gateway's machine.
func SSHCommandTree(f *cmdutil.Factory) *cobra.Command {
	ios := f.IOStreams
	root := &cobra.Command{
		Use:           "gpuaas",
		Short:         "gpuaas commands over SSH",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.FlagErrorWrap(err) })
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().StringVarP(&f.Flags.Project, "project", "p", "", "Project to act in")
	root.AddCommand(
		auth.NewCmdWhoami(f, nil),
		project.NewCmdProject(f),
		catalog.NewCmdCatalog(f),
		alloc.NewCmdAlloc(f),
		session.NewCmdSession(f),
	)
	return root
}
