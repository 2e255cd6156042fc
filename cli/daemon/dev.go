package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/devenv"
)

// Dev defaults: the seeded platform (see devenv).
const (
	DevAdminEmail  = devenv.AdminEmail
	DevProject     = devenv.Project
	DevContextName = "dev"
	// DevCreditMinor is the dev project's initial credit: $100.
	DevCreditMinor = devenv.CreditMinor
)

// DevOptions are the inputs of `gpuaas dev`: the platform's Config, whose
// fields the flags set and devRun completes, and what the command itself
// does around it.
type DevOptions struct {
	IO           *cmdutil.IOStreams
	PasswordFile string
	LogLevel     string
	// WriteConfig writes the dev context into the client config.
	WriteConfig bool
	// ConfigDir overrides the client config directory (tests).
	ConfigDir string
	// Ready, when set, is called with the NATS URL once everything serves
	// (tests).
	Ready func(natsURL string)
	// Started, when set, is called with the platform once everything
	// serves (tests that stop parts of it).
	Started func(*devenv.Env)
	// VM is --vm and --vm-image (dev_vm.go).
	VM devVMFlags
	devenv.Config
}

// NewCmdDev builds `gpuaas dev`; its gateway serves sshTree over SSH.
func NewCmdDev(f *cmdutil.Factory, sshTree cmdutil.CommandTree, runF func(context.Context, *DevOptions) error) *cobra.Command {
	opts := &DevOptions{IO: f.IOStreams, WriteConfig: true, Config: devenv.Config{Commands: sshCommands(sshTree)}}
	cmd := &cobra.Command{
		Use:     "dev",
		Short:   "Run the whole platform on this machine",
		GroupID: "daemon",
		Long: `Run the whole platform in one process: an embedded NATS server (JetStream on
disk), a private PostgreSQL cluster started from the local PostgreSQL
install, and controld, with simulated GPU hosts.

The first start seeds the catalog, a local admin user (its password is
printed once, or taken from --password-file), a "dev" project and two
simulated hosts (8×H200 slices on two NUMA nodes, and an 8×H100 bare-metal
node). The dev project starts with a $100 credit, charged every
--billing-window while allocations are active (see "gpuaas billing balance"). It writes a "dev" context into the client config so that
"gpuaas login" works from another shell. Later starts reuse the data;
--reset starts over. Ctrl-C (or SIGTERM) stops everything in order: the
SSH gateway first (open sessions are told "gateway shutting down", their
recordings uploaded and their index entries closed), then the simulated
hosts, controld, NATS and PostgreSQL. Sessions a crash left running are
marked interrupted at the next start, with what was recorded.

--cluster runs three NATS servers in a cluster instead of one (each on a
free port; JetStream keeps 3 copies of the events stream and recordings)
and two controld replicas, so stopping a server or a replica can be tried
on one machine: clients are given all three servers' URLs.

NATS runs the production trust model: every connection needs a session
token or a registered key, and controld decides through the auth callout.
It has no TLS in dev, so it listens on loopback (--host).`,
		Example: `  gpuaas dev
  gpuaas dev --data /tmp/gpuaas-dev --reset
  gpuaas dev --password-file ./admin-password
  gpuaas dev --cluster`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.DataDir == "" {
				dir, err := defaultDataDir()
				if err != nil {
					return err
				}
				opts.DataDir = dir
			}
			abs, err := filepath.Abs(opts.DataDir)
			if err != nil {
				return cmdutil.FlagErrorf("--data: %v", err)
			}
			opts.DataDir = abs
			if opts.Hosts < 0 || opts.Hosts > devenv.MaxHosts {
				return cmdutil.FlagErrorf("--hosts must be 0-%d", devenv.MaxHosts)
			}
			if opts.SSHPort < 0 || opts.SSHPort > 65535 {
				return cmdutil.FlagErrorf("--ssh-port must be 0-65535")
			}
			if opts.HTTPSPort < 0 || opts.HTTPSPort > 65535 {
				return cmdutil.FlagErrorf("--https-port must be 0-65535")
			}
			if opts.IdleMinPeriod < time.Second {
				return cmdutil.FlagErrorf("--idle-min-period must be at least 1s")
			}
			if opts.BillingWindow < time.Second {
				return cmdutil.FlagErrorf("--billing-window must be at least 1s")
			}
			if opts.NATSPort < 0 || opts.NATSPort > 65535 {
				return cmdutil.FlagErrorf("--nats-port must be 0-65535")
			}
			if opts.Cluster {
				if c.Flags().Changed("nats-port") && opts.NATSPort != 0 {
					return cmdutil.FlagErrorf("--nats-port and --cluster: the cluster's NATS servers take free ports")
				}
				opts.NATSPort = 0
			}
			if opts.HTTPPort < 0 || opts.HTTPPort > 65535 {
				return cmdutil.FlagErrorf("--http-port must be 0-65535")
			}
			if (opts.OIDC.Issuer == "") != (opts.OIDC.ClientID == "") {
				return cmdutil.FlagErrorf("--oidc-issuer and --oidc-client-id go together")
			}
			if opts.HTTPSACMECA != "" && !strings.HasPrefix(opts.HTTPSACMECA, "https://") {
				return cmdutil.FlagErrorf("--https-acme-ca must be an https URL (an ACME directory), got %q", opts.HTTPSACMECA)
			}
			if opts.HTTPSACMECARoot != "" && opts.HTTPSACMECA == "" {
				return cmdutil.FlagErrorf("--https-acme-ca-root needs --https-acme-ca")
			}
			if opts.StripeAPI != "" && devenv.CheckStripeAPI(opts.StripeAPI) != nil {
				return cmdutil.FlagErrorf("--stripe-api must be an http(s) URL such as http://127.0.0.1:12111, got %q", opts.StripeAPI)
			}
			if err := opts.VM.apply(&opts.Config, c.Flags().Changed("vm-image")); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return devRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.DataDir, "data", "", "Data directory (default: /var/lib/gpuaas/dev as root, else $XDG_DATA_HOME/gpuaas/dev)")
	fl.BoolVar(&opts.Reset, "reset", false, "Delete the data directory first and start from scratch")
	fl.StringVar(&opts.PasswordFile, "password-file", "", "Set the admin password from this file instead of generating one")
	fl.StringVar(&opts.NATSHost, "host", "127.0.0.1", "Address NATS listens on; every connection is authenticated (the auth callout, as in production) but not encrypted (no TLS in dev): keep it on loopback")
	fl.IntVar(&opts.NATSPort, "nats-port", 4222, "NATS port (0 picks a free one)")
	fl.BoolVar(&opts.Cluster, "cluster", false, "Run 3 NATS servers in a cluster (free ports, JetStream with 3 replicas) and 2 controld replicas, to try HA on one machine")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "Log level: debug, info, warn, error")
	fl.DurationVar(&opts.SessionTTL, "session-ttl", 12*time.Hour, "Lifetime of session tokens")
	fl.IntVar(&opts.Hosts, "hosts", 2, "Simulated GPU hosts to run: slice and bare-metal hosts, alternately")
	opts.VM.register(fl)
	fl.IntVar(&opts.SSHPort, "ssh-port", 2222, "Port of the SSH gateway on loopback (0 picks a free one)")
	fl.IntVar(&opts.HTTPSPort, "https-port", 0, "Port of the gateway's HTTPS front for exposures on loopback (0 picks a free one)")
	fl.DurationVar(&opts.BillingWindow, "billing-window", 10*time.Second, "How often active allocations are charged")
	fl.DurationVar(&opts.IdleMinPeriod, "idle-min-period", devenv.DefaultIdleMinPeriod, "Shortest --idle-release-after or --max-duration users may set")
	fl.StringVar(&opts.StripeAPI, "stripe-api", "", "Enable top-ups against this Stripe API, e.g. stripe-mock at http://127.0.0.1:12111 (key: $GPUAAS_STRIPE_SECRET_KEY, default a test key)")
	fl.IntVar(&opts.HTTPPort, "http-port", 8787, "With --stripe-api: port of controld's HTTP server (Stripe webhooks) on loopback (0 picks a free one)")
	fl.StringVar(&opts.OIDC.Issuer, "oidc-issuer", "", "Also accept logins through this OIDC issuer `URL` (gpuaas login then uses its device flow)")
	fl.StringVar(&opts.OIDC.ClientID, "oidc-client-id", "", "The public OIDC client `id` that gpuaas login uses with --oidc-issuer")
	fl.StringVar(&opts.HTTPSACMECA, "https-acme-ca", "", "Obtain exposures' certificates from this ACME directory `URL` (TLS-ALPN-01 on --https-port) instead of the dev CA, e.g. a local Pebble")
	fl.StringVar(&opts.HTTPSACMECARoot, "https-acme-ca-root", "", "PEM `file` of roots to trust for --https-acme-ca's own HTTPS endpoint")
	fl.StringVar(&opts.WebhookCAFile, "webhook-ca-file", "", "PEM `file` of certificates that verify webhook receivers instead of the system's roots (an HTTPS receiver with its own CA)")
	return cmd
}

// defaultDataDir keeps root's data where the postgres account can reach it
// (root's home is usually 0700).
func defaultDataDir() (string, error) {
	if os.Geteuid() == 0 {
		return "/var/lib/gpuaas/dev", nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "gpuaas", "dev"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data directory: pass --data")
	}
	return filepath.Join(home, ".local", "share", "gpuaas", "dev"), nil
}

// RunDev runs `gpuaas dev` as its flags in opts say. Tests call it from
// NewCmdDev's runF, after setting what no flag sets (Started,
// DatabaseURL).
func RunDev(ctx context.Context, opts *DevOptions) error { return devRun(ctx, opts) }

func devRun(ctx context.Context, opts *DevOptions) (err error) {
	// `make dev | tee log` and Ctrl-C: tee dies with the SIGINT, and the
	// next log line of the clean-up would kill this process with SIGPIPE,
	// leaving the sim hosts' users and processes behind. Ignored, a write
	// to the broken pipe fails (the line is lost) and the clean-up goes on.
	signal.Ignore(syscall.SIGPIPE)
	log, err := newLogger(opts.IO.ErrOut, opts.LogLevel)
	if err != nil {
		return err
	}
	password, err := readPasswordFile(opts.PasswordFile)
	if err != nil {
		return err
	}
	// Ports asked for that are taken fail before anything starts.
	if err := checkDevPorts(opts); err != nil {
		return err
	}
	cfg := devConfig(opts, os.Getenv)
	cfg.AdminPassword, cfg.Log = password, log
	env, err := devenv.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if closeErr := env.Close(); closeErr != nil && err == nil {
			err = closeErr
		}
	}()
	if opts.WriteConfig {
		if err := writeDevContext(opts.ConfigDir, env.NATSURL, env.GatewayAddr, opts.Reset); err != nil {
			return err
		}
	}
	printBanner(opts, env, cfg.SystemUsers)
	if opts.Ready != nil {
		opts.Ready(env.NATSURL)
	}
	if opts.Started != nil {
		opts.Started(env)
	}
	if err := env.Wait(ctx); err != nil {
		return err
	}
	fmt.Fprintln(opts.IO.ErrOut, "stopping gpuaas dev…")
	return nil
}

// devConfig is the platform the flags and the environment ask for:
// GPUAAS_STRIPE_SECRET_KEY and GPUAAS_STRIPE_WEBHOOK_SECRET, when set,
// replace the Stripe test credentials. As root the sim hosts' users are
// real unprivileged accounts.
func devConfig(opts *DevOptions, getenv func(string) string) devenv.Config {
	cfg := opts.Config
	cfg.SystemUsers = isolateSim()
	cfg.TUI = sshDashboard
	cfg.StripeSecretKey = getenv("GPUAAS_STRIPE_SECRET_KEY")
	cfg.StripeWebhookSecret = getenv("GPUAAS_STRIPE_WEBHOOK_SECRET")
	return cfg
}

// checkDevPorts fails when a port asked for is taken (0 picks a free one).
func checkDevPorts(opts *DevOptions) error {
	if opts.NATSPort != 0 {
		if err := checkPortFree(opts.NATSHost, opts.NATSPort); err != nil {
			return cmdutil.FlagErrorf("cannot listen on %s:%d (%v): is another `gpuaas dev` running? pick another --nats-port", opts.NATSHost, opts.NATSPort, err)
		}
	}
	if opts.SSHPort != 0 {
		if err := checkPortFree("127.0.0.1", opts.SSHPort); err != nil {
			return fmt.Errorf("ssh gateway: cannot listen on 127.0.0.1:%d (%v): pick another --ssh-port", opts.SSHPort, err)
		}
	}
	if opts.StripeAPI != "" && opts.HTTPPort != 0 {
		if err := checkPortFree("127.0.0.1", opts.HTTPPort); err != nil {
			return cmdutil.FlagErrorf("cannot listen on 127.0.0.1:%d (%v): pick another --http-port", opts.HTTPPort, err)
		}
	}
	return nil
}

func readPasswordFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", cmdutil.FlagErrorf("--password-file: %v", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if len(pw) < 8 {
		return "", cmdutil.FlagErrorf("--password-file: the password must be at least 8 characters")
	}
	return pw, nil
}

// checkPortFree fails when host:port cannot be listened on.
func checkPortFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// writeDevContext points the "dev" context at this server and makes it
// current. A session from an earlier run is kept (the data, and so the
// session, survive restarts) unless the data was reset or the server
// moved, and with it the user it belongs to: the context's user, user id
// and token always name one person, so `context list` and `whoami` agree.
// Only a context without a session gets the admin as its user (the email
// `gpuaas login` asks a password for).
func writeDevContext(dir, url, gateway string, reset bool) error {
	var cfg *clientconfig.Config
	var err error
	if dir != "" {
		cfg, err = clientconfig.Load(dir)
	} else {
		cfg, err = clientconfig.LoadDefault()
	}
	if err != nil {
		return err
	}
	cfg.UpdateContext(DevContextName, func(c *clientconfig.Context) {
		if reset || c.Server != url {
			*c = clientconfig.Context{}
		}
		// No project is pinned: the seeded user's default project (dev)
		// is kept by the server, like anyone's (`gpuaas project use`).
		c.Server, c.Gateway = url, gateway
		if c.Token == "" && c.UserID == "" {
			c.User = DevAdminEmail
		}
	})
	if err := cfg.UseContext(DevContextName); err != nil {
		return err
	}
	return cfg.Save()
}
