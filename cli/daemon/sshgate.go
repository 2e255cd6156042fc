package daemon

import (
	"context"
	"os"

	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/daemonconfig"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
	"github.com/gpuaas/gpuaas/sshgate"
)

// SSHGateOptions are the inputs of `gpuaas sshgate`: the gateway's
// Config, whose fields the flags set (Listen, HostKeyPath, Advertise,
// Principals, Name, RecordingDir) and sshgateRun completes, and how to
// reach NATS.
type SSHGateOptions struct {
	IO   *cmdutil.IOStreams
	NATS natsFlags
	// NkeyFile holds the gateway's NATS key (its identity towards NATS and
	// controld).
	NkeyFile string
	LogLevel string
	// Settings are --config and --print-config.
	Settings settingsFlags
	sshgate.Config
}

// sshgateSettings are the variables that stand in for sshgate's flags.
var sshgateSettings = daemonconfig.Spec{Env: natsEnv("server", map[string]string{"nkey": "GPUAAS_NKEY_FILE"})}

// NewCmdSSHGate builds `gpuaas sshgate`; the gateway serves sshTree over
// SSH.
func NewCmdSSHGate(f *cmdutil.Factory, sshTree cmdutil.CommandTree, runF func(context.Context, *SSHGateOptions) error) *cobra.Command {
	opts := &SSHGateOptions{IO: f.IOStreams, Config: sshgate.Config{Commands: sshCommands(sshTree), TUI: sshDashboard}}
	cmd := &cobra.Command{
		Use:     "sshgate",
		Short:   "Run the SSH gateway",
		GroupID: "daemon",
		Long: `Run the SSH gateway users reach their allocations through:
ssh <allocation-id>@gateway opens a shell (or runs a command, sftp, scp,
ssh -L) on the allocation's node; any other user name gets gpuaas commands
(ssh gpuaas@gateway alloc list) or, on a terminal, the dashboard, as the
certificate's user. gpuaas ssh-config names the gateway itself: ssh gpuaas-CONTEXT.

Only user certificates from controld's user CA are accepted (gpuaas login
gets one). Each allocation session is authorized by controld, which hands
the gateway a one-minute ticket for the node; PTY sessions are recorded
(asciicast v2) into the terminal-recordings object store.

The gateway's identity is an nkey (--nkey, 0600): it signs NATS's
connection nonce with it, and logs in to controld with it for session
tokens that live 15 minutes; no long-lived token exists. Create and
register one with ` + "`gpuaas ops nats-identity add --kind gateway --name NAME --out FILE`" + `
(revoke it with ` + "`gpuaas ops nats-identity revoke`" + `). Its host key is generated in
--host-key (0600) on first start, and certified by controld's host CA at
every start, so clients with the @cert-authority line from gpuaas
ssh-config trust it without a prompt. Run as many replicas as you like
behind a TCP load balancer; they share nothing.

On SIGTERM (systemd stop) or SIGINT the gateway stops accepting
connections, tells each open session "gateway shutting down" (on its
stderr; ssh exits 255), uploads the recordings and closes the sessions'
index entries, then exits. Give each replica its own --name and
--recording-dir: when an instance starts, it uploads what a crash left in
its recording directory and marks the sessions its name left running as
interrupted.

Nodes let the gateway in only with a gateway certificate as well as the
one-minute ticket: controld's internal CA certifies the gateway's key
(the same --nkey, an Ed25519 key) for an hour at a time, renewed at
half-life, and only for a key registered as a gateway. The gateway
reaches a node's terminal over a link by default: one TLS connection per
client connection, carrying its SSH channels, the node's terminal host
key pinned as its certificate (--node-transport ssh uses a second SSH
connection instead, for nodes whose hostd predates links).

Environment: GPUAAS_NATS_URL, GPUAAS_NKEY_FILE, GPUAAS_NATS_CA,
GPUAAS_NATS_CERT and GPUAAS_NATS_KEY stand in for the flags.

` + settingsHelp,
		Example: `  gpuaas sshgate --listen :22 --server tls://nats:4222 --nats-ca /etc/gpuaas/nats-ca.pem \
    --nkey /etc/gpuaas/sshgate.nk --host-key /var/lib/gpuaas/sshgate/host_ed25519_key --advertise ssh.gpuaas.example:22`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if printed, err := opts.Settings.load(c, opts.IO.Out, sshgateSettings); printed || err != nil {
				return err
			}
			if opts.NkeyFile == "" {
				return cmdutil.FlagErrorf("--nkey (or GPUAAS_NKEY_FILE, or nkey in --config) is required: " +
					"`gpuaas ops nats-identity add --kind gateway --name NAME --out FILE` makes one")
			}
			if opts.HostKeyPath == "" {
				return cmdutil.FlagErrorf("--host-key is required")
			}
			if err := sshgate.CheckNodeTransport(opts.Config.NodeTransport); err != nil {
				return cmdutil.FlagErrorf("--node-transport: %v", err)
			}
			if err := checkHTTPSFlags(&opts.Config.HTTPS); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return sshgateRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Listen, "listen", ":2222", "Address to serve SSH on")
	opts.NATS.register(fl, "server")
	fl.StringVar(&opts.NkeyFile, "nkey", "", "File holding the gateway's registered nkey seed")
	fl.StringVar(&opts.HostKeyPath, "host-key", "/var/lib/gpuaas/sshgate/host_ed25519_key", "The gateway's ed25519 host key; generated (0600) when missing")
	fl.StringVar(&opts.Advertise, "advertise", "", "host:port users ssh to; its host is certified as a principal")
	fl.StringSliceVar(&opts.Principals, "principal", nil, "Host name to certify for the host key (repeatable; default: the --advertise host)")
	fl.StringVar(&opts.Name, "name", "", "Name of this gateway instance in the session index (default: the host name)")
	fl.StringVar(&opts.RecordingDir, "recording-dir", "", "This instance's own directory where recordings wait for upload; after a crash the next start uploads them and marks their sessions interrupted (default: unlinked files in the temp dir, lost in a crash)")
	fl.StringVar(&opts.Config.NodeTransport, "node-transport", sshgate.TransportLink, "How nodes' terminal servers are reached: link (one TLS connection carrying the SSH channels) or ssh (a second SSH connection, for nodes that predate links)")
	fl.DurationVar(&opts.Config.ActivityReportInterval, "activity-report-interval", sshgate.DefaultActivityReportInterval, "How often allocation activity (channel data) is reported to controld for idle release")
	fl.Float64Var(&opts.Config.ConnLimit.Rate, "conn-rate", sshgate.DefaultConnRate, "New connections a second one client address may open after its burst (-1: no limit, e.g. behind a TCP load balancer; loopback is never limited)")
	fl.IntVar(&opts.Config.ConnLimit.Burst, "conn-burst", sshgate.DefaultConnBurst, "New connections one client address may open at once before --conn-rate applies")
	fl.IntVar(&opts.Config.ConnLimit.MaxOpen, "conn-max-open", sshgate.DefaultConnMaxOpen, "Connections one client address may hold open")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "Log level: debug, info, warn, error")
	addMetricsFlag(fl, &opts.MetricsAddr)
	addHTTPSFlags(fl, &opts.Config.HTTPS)
	opts.Settings.register(fl)
	return cmd
}

func sshgateRun(ctx context.Context, opts *SSHGateOptions) error {
	log, err := newLogger(opts.IO.ErrOut, opts.LogLevel)
	if err != nil {
		return err
	}
	cfg := opts.Config
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	key, err := bus.ReadSeedFile(opts.NkeyFile, nkeys.PrefixByteUser)
	if err != nil {
		return cmdutil.FlagErrorf("--nkey: %v", err)
	}
	nc, client, err := controlplane.ConnectGateway(opts.NATS.URL, opts.NATS.tls(), key, bus.LogConnection(log))
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg.Client, cfg.GatewayKey, cfg.Log = client, controlplane.GatewayKey(key), log
	g, err := sshgate.New(cfg)
	if err != nil {
		return err
	}
	return g.Run(ctx)
}
