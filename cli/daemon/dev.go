package daemon

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/config"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/pgserver"
)

// Dev defaults.
const (
	DevAdminEmail  = "admin@localhost"
	DevProject     = "dev"
	DevContextName = "dev"
	devDatabase    = "gpuaas"
	// DevCreditMinor is the dev project's initial credit: $100.
	DevCreditMinor = 100_00
)

// DevOptions are the inputs of `gpuaas dev`.
type DevOptions struct {
	IO           *cmdutil.IOStreams
	DataDir      string
	Reset        bool
	PasswordFile string
	Host         string
	NATSPort     int
	LogLevel     string
	SessionTTL   time.Duration
	// Hosts is how many simulated GPU hosts to run.
	Hosts int
	// SSHPort is where the SSH gateway listens on loopback (0: any).
	SSHPort int
	// BillingWindow is how often usage is charged (short in dev, so the
	// balance visibly falls).
	BillingWindow time.Duration
	// OIDCIssuer and OIDCClientID, when set, let people log in through
	// that identity provider as well (auth.exchange, `gpuaas login`).
	OIDCIssuer   string
	OIDCClientID string
	// WriteConfig writes the dev context into the client config.
	WriteConfig bool
	// ConfigDir overrides the client config directory (tests).
	ConfigDir string
	// Ready, when set, is called with the NATS URL once everything serves
	// (tests).
	Ready func(natsURL string)
	// StripeAPI, when set, enables top-ups against this Stripe API base
	// (stripe-mock, or Stripe's test mode) and starts controld's HTTP
	// server for webhooks on HTTPPort.
	StripeAPI string
	HTTPPort  int

	gatewayAddr string // set once chosen
	webhookURL  string // set once chosen, with --stripe-api
	// isolate, set when running as root, makes the sim hosts' users real
	// unprivileged accounts (sim.Options.SystemUsers).
	isolate bool
}

func (o *DevOptions) gatewayHost() string {
	host, _, _ := net.SplitHostPort(o.gatewayAddr)
	return host
}

// NewCmdDev builds `gpuaas dev`.
func NewCmdDev(f *cmdutil.Factory, runF func(context.Context, *DevOptions) error) *cobra.Command {
	opts := &DevOptions{IO: f.IOStreams, WriteConfig: true}
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
--reset starts over. Ctrl-C stops everything, PostgreSQL included.`,
		Example: `  gpuaas dev
  gpuaas dev --data /tmp/gpuaas-dev --reset
  gpuaas dev --password-file ./admin-password`,
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
			if opts.Hosts < 0 || opts.Hosts > 64 {
				return cmdutil.FlagErrorf("--hosts must be 0-64")
			}
			if opts.SSHPort < 0 || opts.SSHPort > 65535 {
				return cmdutil.FlagErrorf("--ssh-port must be 0-65535")
			}
			if opts.BillingWindow < time.Second {
				return cmdutil.FlagErrorf("--billing-window must be at least 1s")
			}
			if opts.NATSPort < 0 || opts.NATSPort > 65535 {
				return cmdutil.FlagErrorf("--nats-port must be 0-65535")
			}
			if opts.HTTPPort < 0 || opts.HTTPPort > 65535 {
				return cmdutil.FlagErrorf("--http-port must be 0-65535")
			}
			if (opts.OIDCIssuer == "") != (opts.OIDCClientID == "") {
				return cmdutil.FlagErrorf("--oidc-issuer and --oidc-client-id go together")
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
	fl.StringVar(&opts.Host, "host", "127.0.0.1", "Address NATS listens on (keep it on loopback: dev has no connection auth)")
	fl.IntVar(&opts.NATSPort, "nats-port", 4222, "NATS port (0 picks a free one)")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "Log level: debug, info, warn, error")
	fl.DurationVar(&opts.SessionTTL, "session-ttl", 12*time.Hour, "Lifetime of session tokens")
	fl.IntVar(&opts.Hosts, "hosts", 2, "Simulated GPU hosts to run: slice and bare-metal hosts, alternately")
	fl.IntVar(&opts.SSHPort, "ssh-port", 2222, "Port of the SSH gateway on loopback (0 picks a free one)")
	fl.DurationVar(&opts.BillingWindow, "billing-window", 10*time.Second, "How often active allocations are charged")
	fl.StringVar(&opts.StripeAPI, "stripe-api", "", "Enable top-ups against this Stripe API, e.g. stripe-mock at http://127.0.0.1:12111 (key: $GPUAAS_STRIPE_SECRET_KEY, default a test key)")
	fl.IntVar(&opts.HTTPPort, "http-port", 8787, "With --stripe-api: port of controld's HTTP server (Stripe webhooks) on loopback (0 picks a free one)")
	fl.StringVar(&opts.OIDCIssuer, "oidc-issuer", "", "Also accept logins through this OIDC issuer (`gpuaas login` then uses its device flow)")
	fl.StringVar(&opts.OIDCClientID, "oidc-client-id", "", "The public OIDC client id `gpuaas login` uses with --oidc-issuer")
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

func devRun(ctx context.Context, opts *DevOptions) (err error) {
	log, err := newLogger(opts.IO.ErrOut, opts.LogLevel)
	if err != nil {
		return err
	}
	password, err := readPasswordFile(opts.PasswordFile)
	if err != nil {
		return err
	}
	if opts.Reset {
		if err := os.RemoveAll(opts.DataDir); err != nil {
			return fmt.Errorf("reset %s: %w", opts.DataDir, err)
		}
	}
	opts.isolate = isolateSim()
	if err := prepareDataDir(opts.DataDir, opts.isolate); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	logIsolation(log, opts.isolate)
	if opts.NATSPort != 0 {
		if err := checkPortFree(opts.Host, opts.NATSPort); err != nil {
			return err
		}
	}
	if opts.SSHPort != 0 {
		// A port asked for that is taken fails before anything starts.
		if _, err := gatewayAddress(opts.SSHPort); err != nil {
			return err
		}
	}

	pg, err := pgserver.Start(ctx, pgserver.Config{DataDir: filepath.Join(opts.DataDir, "pg"), Logger: log})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if stopErr := pg.Stop(stopCtx); stopErr != nil && err == nil {
			err = fmt.Errorf("stop postgres: %w", stopErr)
		}
	}()
	if err := ensureDatabase(ctx, pg, devDatabase); err != nil {
		return err
	}

	// The same trust model as production: controld decides every other
	// connection through the auth callout.
	keys, err := bus.LoadOrCreateKeys(filepath.Join(opts.DataDir, "nats-keys"))
	if err != nil {
		return err
	}
	auth := keys.Public()
	ns, err := bus.Start(bus.Config{Host: opts.Host, Port: opts.NATSPort, StoreDir: filepath.Join(opts.DataDir, "nats"),
		Auth: &auth, Logger: log})
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	nc, sys, err := connectControld(ns.ClientURL(), bus.TLS{}, keys)
	if err != nil {
		return err
	}
	defer nc.Close()
	defer sys.Close()

	// Picked once NATS listens, so a free port is not the one NATS takes
	// next.
	gatewayAddr, err := gatewayAddress(opts.SSHPort)
	if err != nil {
		return err
	}
	opts.gatewayAddr = gatewayAddr

	stripe, httpAddr, err := devStripe(opts)
	if err != nil {
		return err
	}
	srv, err := controld.New(ctx, controld.Config{DatabaseURL: pg.ConnString(devDatabase), NATS: nc, Log: log,
		SystemNATS: sys, BusKeys: keys,
		GatewayAddr: gatewayAddr,
		Identity: identity.Settings{SessionTTL: opts.SessionTTL,
			OIDC: identity.OIDCConfig{Issuer: opts.OIDCIssuer, ClientID: opts.OIDCClientID}},
		Hosts:   controld.HostsConfig{HeartbeatInterval: time.Second, AutoApproveSlots: true},
		Billing: controld.BillingConfig{Window: opts.BillingWindow},
		Stripe:  stripe, HTTPAddr: httpAddr})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	defer func() {
		stop()
		if runErr := <-done; runErr != nil && err == nil {
			err = runErr
		}
	}()
	select {
	case <-srv.Ready():
	case err := <-done:
		done <- err
		return err
	}

	generated := false
	if password == "" {
		password, generated = newPassword(), true
	}
	res, err := srv.ApplySeed(ctx, controld.Seed{Catalog: catalog.Defaults, AdminEmail: DevAdminEmail, AdminPassword: password,
		Project: DevProject, InitialCreditMinor: DevCreditMinor})
	if err != nil {
		return err
	}
	if !res.AdminCreated && opts.PasswordFile != "" {
		if err := srv.Identity().SetPassword(ctx, srv.Pool(), DevAdminEmail, password); err != nil {
			return err
		}
	}
	fleet, err := startSimHosts(runCtx, srv, res.Admin.ID, ns.ClientURL(), opts, log)
	if err != nil {
		return err
	}
	defer fleet.stop()
	if err := fleet.waitReady(ctx, srv); err != nil {
		return err
	}
	gw, err := startGateway(runCtx, srv, res.Admin.ID, ns.ClientURL(), gatewayAddr, opts, log)
	if err != nil {
		return err
	}
	defer gw.stop()
	if opts.WriteConfig {
		if err := writeDevContext(opts.ConfigDir, ns.ClientURL(), gatewayAddr, opts.Reset); err != nil {
			return err
		}
	}
	printBanner(opts, ns.ClientURL(), res.AdminCreated && generated, password, opts.PasswordFile != "")
	if opts.Ready != nil {
		opts.Ready(ns.ClientURL())
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(opts.IO.ErrOut, "stopping gpuaas dev…")
		return nil
	case <-pg.Done():
		return fmt.Errorf("postgres exited unexpectedly: %v (log: %s)", pg.Wait(), filepath.Join(opts.DataDir, "pg", "postgres.log"))
	case err := <-done:
		done <- err
		if err == nil {
			err = errors.New("controld stopped unexpectedly")
		}
		return err
	case err := <-fleet.failed:
		return fmt.Errorf("simulated host stopped: %w", err)
	case err := <-gw.failed:
		return fmt.Errorf("ssh gateway stopped: %w", err)
	}
}

// prepareDataDir makes the data directory and the directories dev keeps
// there private: 0700, whatever they were. With isolated sim users (as
// root) the data directory and hosts/ are 0711 instead: the postgres
// account must pass through to pg/ (itself 0700, postgres's) and the sim
// users to their homes (hosts/<host>/sim/homes/<user>), but no one else
// may list them, and everything else in them is 0700 or 0600.
func prepareDataDir(dir string, isolate bool) error {
	top := os.FileMode(0o700)
	if isolate {
		top = 0o711
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{dir, top}, {filepath.Join(dir, "hosts"), top}, {filepath.Join(dir, "nats"), 0o700}, {filepath.Join(dir, "sshgate"), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
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

func newPassword() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.EncodeToString(b[:]))
}

func checkPortFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return cmdutil.FlagErrorf("cannot listen on %s:%d (%v): is another `gpuaas dev` running? pick another --nats-port", host, port, err)
	}
	return l.Close()
}

// ensureDatabase creates the dev database on first start.
func ensureDatabase(ctx context.Context, pg *pgserver.Server, name string) error {
	conn, err := pgx.Connect(ctx, pg.ConnString("postgres"))
	if err != nil {
		return fmt.Errorf("connect postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}

// writeDevContext points the "dev" context at this server and makes it
// current. A token from an earlier run is kept (the data, and so the
// session, survive restarts) unless the data was reset.
func writeDevContext(dir, url, gateway string, reset bool) error {
	var cfg *config.Config
	var err error
	if dir != "" {
		cfg, err = config.Load(dir)
	} else {
		cfg, err = config.LoadDefault()
	}
	if err != nil {
		return err
	}
	cfg.UpdateContext(DevContextName, func(c *config.Context) {
		if reset || c.Server != url {
			*c = config.Context{}
		}
		c.Server, c.User, c.Gateway = url, DevAdminEmail, gateway
		if c.Project == "" {
			c.Project = DevProject
		}
	})
	if err := cfg.UseContext(DevContextName); err != nil {
		return err
	}
	return cfg.Save()
}

func printBanner(opts *DevOptions, url string, showPassword bool, password string, fromFile bool) {
	w := opts.IO.ErrOut
	fmt.Fprintln(w, "\ngpuaas dev is running")
	fmt.Fprintln(w, describe("server", url))
	fmt.Fprintln(w, describe("data", opts.DataDir))
	if showPassword {
		fmt.Fprintln(w, describe("admin", DevAdminEmail+"  password: "+password+"  (shown once; keep it)"))
	} else if fromFile {
		fmt.Fprintln(w, describe("admin", DevAdminEmail+"  (password from --password-file)"))
	} else {
		fmt.Fprintln(w, describe("admin", DevAdminEmail+"  (password as set before; --password-file sets a new one)"))
	}
	fmt.Fprintln(w, describe("project", DevProject))
	fmt.Fprintln(w, describe("hosts", fmt.Sprintf("%d simulated (gpuaas node list)", opts.Hosts)))
	fmt.Fprintln(w, describe("ssh", "gateway on "+opts.gatewayAddr))
	fmt.Fprintln(w, describe("nats", "auth callout on: every connection needs a session token or a registered key"))
	if opts.isolate {
		fmt.Fprintln(w, describe("isolation", "sessions on sim hosts run as unprivileged users of their own"))
	} else {
		fmt.Fprintln(w, describe("isolation", "NONE: not root, so sessions on sim hosts run as you and can read this process's data"))
	}
	if opts.StripeAPI != "" {
		fmt.Fprintln(w, describe("stripe", opts.StripeAPI+"; webhook "+opts.webhookURL+" (secret from $GPUAAS_STRIPE_WEBHOOK_SECRET, default "+devWebhookSecret+")"))
	} else {
		fmt.Fprintln(w, describe("stripe", "off: `gpuaas billing topup` is unavailable (see --stripe-api)"))
	}
	fmt.Fprintln(w, "\nNext, from another shell:")
	fmt.Fprintln(w, "  gpuaas login")
	fmt.Fprintln(w, "  gpuaas catalog list")
	fmt.Fprintln(w, "  gpuaas alloc create --sku h200-slice --gpus 2 --wait")
	fmt.Fprintln(w, "  gpuaas alloc list")
	fmt.Fprintln(w, "  gpuaas ssh-config --write && ssh <alloc-id>@"+opts.gatewayHost())
	fmt.Fprintln(w, "\nnatscli against it (read-only server monitoring, after gpuaas login):")
	fmt.Fprintln(w, "  gpuaas ops nats-identity add --kind operator --name me --out ops.nk")
	fmt.Fprintln(w, "  nats --server "+url+" --nkey ops.nk server list")
	fmt.Fprintln(w, "\nPress Ctrl-C to stop.")
}
