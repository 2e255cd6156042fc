package daemon

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/daemonconfig"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
)

// ControldOptions are the inputs of `gpuaas controld`.
type ControldOptions struct {
	IO          *cmdutil.IOStreams
	DatabaseURL string
	NATS        natsFlags
	// NATSKeys is the directory of the NATS trust model's keys (gpuaas ops
	// nats-setup writes it).
	NATSKeys     string
	SessionTTL   time.Duration
	OIDCIssuer   string
	OIDCClientID string
	SeedCatalog  bool
	LogLevel     string
	GatewayAddr  string
	AppsURL      string
	CAKeyFile    string
	SSHCertTTL   time.Duration

	// SecretsKeyFile seals project secrets (controld/secrets.LoadKeyFile).
	SecretsKeyFile string

	// Stripe (top-ups and refunds): the secrets come from the environment
	// (GPUAAS_STRIPE_SECRET_KEY, GPUAAS_STRIPE_WEBHOOK_SECRET), never argv.
	// APIRate and APIBurst are the per-user API limit (requests/s, burst).
	APIRate  float64
	APIBurst int
	// OIDCMaxTokenAge refuses ID tokens issued longer ago.
	OIDCMaxTokenAge time.Duration
	// MinRunway is how long a project's balance must last at its total
	// burn for alloc.create to go ahead (billing.Settings.MinRunway).
	MinRunway time.Duration
	// IdleMinPeriod and IdleWarnAhead tune idle release (idle.Settings).
	IdleMinPeriod time.Duration
	IdleWarnAhead time.Duration
	// SMTPAddr, SMTPFrom and SMTPUsername are the mail relay of billing,
	// budget and idle emails (billing.SMTP); its password is read from
	// GPUAAS_SMTP_PASSWORD, never a flag (ps shows flags).
	SMTPAddr     string
	SMTPFrom     string
	SMTPUsername string

	StripeAPI        string
	StripeSuccessURL string
	StripeCancelURL  string
	HTTPAddr         string
	// StreamReplicas is JetStream's copies of controld's streams.
	StreamReplicas int
	// Streams bound what the streams keep.
	Streams     controld.StreamLimits
	MetricsAddr string
	// DrainTimeout bounds the graceful stop on SIGTERM.
	DrainTimeout time.Duration
	// Webhooks: where deliveries may go (docs/webhooks.md).
	WebhookAllowPrivate bool
	WebhookDeny         []string
	WebhookMaxAttempts  int
	WebhookCAFile       string
	// Settings are --config and --print-config.
	Settings settingsFlags
	// Registry and RegistryCredentials are the OCI registry images are
	// verified against (registry.Settings, docs/images.md).
	Registry, RegistryCredentials string
	// ImageVerifyTimeout bounds one background verification of an image.
	ImageVerifyTimeout time.Duration
}

// controldSettings are controld's settings beyond its flags: the
// variables that stand in for flags, and the secrets.
var controldSettings = daemonconfig.Spec{
	Env:       natsEnv("nats-url", map[string]string{"database-url": "GPUAAS_DATABASE_URL", "nats-keys": "GPUAAS_NATS_KEYS"}),
	Secret:    map[string]func(string) string{"database-url": daemonconfig.RedactURLPassword},
	SecretEnv: []string{"GPUAAS_STRIPE_SECRET_KEY", "GPUAAS_STRIPE_WEBHOOK_SECRET", "GPUAAS_SMTP_PASSWORD"},
}

// NewCmdControld builds `gpuaas controld`.
func NewCmdControld(f *cmdutil.Factory, runF func(context.Context, *ControldOptions) error) *cobra.Command {
	opts := &ControldOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:     "controld",
		Short:   "Run the control daemon",
		GroupID: "daemon",
		Long: `Run the control daemon: the API as a NATS micro service on gpuaas.api.v1.>,
the scheduler, the outbox relay and event fan-out. It applies database
migrations at start. Run as many replicas as you like against one Postgres
and one NATS (cluster). Before the first start a Postgres superuser runs
` + "`gpuaas controld init-db`" + ` once: it creates the database and controld's login
role, which then needs no right to create roles. On a NATS cluster of
three, --jetstream-replicas=3 keeps three copies of the event stream and
of the session recordings.

On SIGTERM controld drains: it hands the outbox relay's lock to another
replica at once, stops taking API requests (the NATS servers send new ones
to the other replicas), answers those it has received and applies the node
results it has taken, within --drain-timeout, then exits. docs/operators.md in the source walks through
a whole installation.

controld decides every other NATS connection through the servers' auth
callout. --nats-keys names the directory of the keys it needs (the callout
issuer and xkey, its own users in the GPUAAS and SYS accounts):
` + "`gpuaas ops nats-setup`" + ` creates it together with the servers' configuration.

Environment: GPUAAS_DATABASE_URL, GPUAAS_NATS_URL, GPUAAS_NATS_KEYS,
GPUAAS_NATS_CA, GPUAAS_NATS_CERT and GPUAAS_NATS_KEY stand in for the flags.
Stripe top-ups need GPUAAS_STRIPE_SECRET_KEY, --stripe-success-url and
--stripe-cancel-url; its webhook needs GPUAAS_STRIPE_WEBHOOK_SECRET and
--http-addr (POST /stripe/webhook, API version ` + payments.APIVersion + `).
Emails to project members (low balance, budgets, idle-release warnings)
need --smtp-addr and --smtp-from; a relay's password is read from
GPUAAS_SMTP_PASSWORD.

` + settingsHelp,
		Example: `  gpuaas controld --database-url postgres://gpuaas@db/gpuaas --nats-url tls://nats:4222 \
    --nats-keys /etc/gpuaas/nats --nats-ca /etc/gpuaas/nats-ca.pem
  gpuaas controld --config /etc/gpuaas/controld.yaml --print-config`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if printed, err := opts.Settings.load(c, opts.IO.Out, controldSettings); printed || err != nil {
				return err
			}
			if opts.DatabaseURL == "" {
				return cmdutil.FlagErrorf("--database-url (or GPUAAS_DATABASE_URL, or database-url in --config) is required")
			}
			if opts.NATSKeys == "" {
				return cmdutil.FlagErrorf("--nats-keys (or GPUAAS_NATS_KEYS, or nats-keys in --config) is required: create it with `gpuaas ops nats-setup`")
			}
			if opts.SMTPAddr != "" && opts.SMTPFrom == "" {
				return cmdutil.FlagErrorf("--smtp-addr needs --smtp-from (the sender of the emails)")
			}
			if (opts.SMTPUsername != "" || os.Getenv("GPUAAS_SMTP_PASSWORD") != "") && opts.SMTPAddr == "" {
				return cmdutil.FlagErrorf("--smtp-username and GPUAAS_SMTP_PASSWORD need --smtp-addr")
			}
			if opts.IdleMinPeriod < time.Second || opts.IdleWarnAhead < 0 {
				return cmdutil.FlagErrorf("--idle-min-period must be at least 1s and --idle-warn-ahead not negative")
			}
			if opts.MinRunway <= 0 {
				return cmdutil.FlagErrorf("--min-runway must be positive, got %s", opts.MinRunway)
			}
			if opts.DrainTimeout <= 0 {
				return cmdutil.FlagErrorf("--drain-timeout must be positive, got %s", opts.DrainTimeout)
			}
			if opts.ImageVerifyTimeout <= 0 {
				return cmdutil.FlagErrorf("--image-verify-timeout must be positive, got %s", opts.ImageVerifyTimeout)
			}
			if opts.WebhookMaxAttempts < 1 {
				return cmdutil.FlagErrorf("--webhook-max-attempts must be at least 1, got %d", opts.WebhookMaxAttempts)
			}
			if _, err := webhookDeny(opts.WebhookDeny); err != nil {
				return err
			}
			if (opts.OIDCIssuer == "") != (opts.OIDCClientID == "") {
				return cmdutil.FlagErrorf("--oidc-issuer and --oidc-client-id go together")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return controldRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.DatabaseURL, "database-url", "", "Postgres connection string")
	opts.NATS.register(fl, "nats-url")
	fl.StringVar(&opts.NATSKeys, "nats-keys", "", "Directory of the NATS trust keys (gpuaas ops nats-setup)")
	fl.DurationVar(&opts.SessionTTL, "session-ttl", 12*time.Hour, "Lifetime of session tokens")
	fl.StringVar(&opts.OIDCIssuer, "oidc-issuer", "", "Accept ID tokens from this OIDC issuer (auth.exchange)")
	fl.StringVar(&opts.OIDCClientID, "oidc-client-id", "", "Audience expected in OIDC ID tokens")
	fl.DurationVar(&opts.OIDCMaxTokenAge, "oidc-max-token-age", 5*time.Minute, "Refuse OIDC ID tokens issued longer ago than this")
	fl.Float64Var(&opts.APIRate, "api-rate", controld.DefaultAPIRate, "Requests per second each user may make (token bucket, per controld replica)")
	fl.IntVar(&opts.APIBurst, "api-burst", controld.DefaultAPIBurst, "Burst of each user's token bucket")
	fl.DurationVar(&opts.MinRunway, "min-runway", billing.DefaultMinRunway,
		"How long a project's balance must last at its total burn (the new allocation included) for alloc create")
	fl.DurationVar(&opts.IdleMinPeriod, "idle-min-period", idle.DefaultMinPeriod, "Shortest --idle-release-after or --max-duration users may set")
	fl.DurationVar(&opts.IdleWarnAhead, "idle-warn-ahead", idle.DefaultWarnAhead, "How long before an idle or maximum-duration release its warning goes out (at most half the period)")
	fl.StringVar(&opts.SMTPAddr, "smtp-addr", "", "SMTP relay (host:port) for low-balance, budget and idle-release emails to project members; empty: no email")
	fl.StringVar(&opts.SMTPFrom, "smtp-from", "", "Sender address of those emails (required with --smtp-addr)")
	fl.StringVar(&opts.SMTPUsername, "smtp-username", "", "SMTP user name, if the relay wants one (the password: GPUAAS_SMTP_PASSWORD)")
	fl.BoolVar(&opts.SeedCatalog, "seed-catalog", true, "Add the default SKUs that do not exist yet")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "Log level: debug, info, warn, error")
	fl.StringVar(&opts.GatewayAddr, "gateway-addr", "", "Where users ssh to (host:port), told to clients by ssh.cas")
	fl.StringVar(&opts.AppsURL, "apps-url", "", "URL pattern of exposures, * for their <port>-<alloc> label (e.g. https://*.apps.example.com), as the gateway's --https-domain serves them")
	fl.StringVar(&opts.CAKeyFile, "ca-key-file", "", "File with 32 random bytes that seal the SSH CA keys in Postgres")
	fl.StringVar(&opts.SecretsKeyFile, "secrets-key-file", "", "File (0600) with 32 random bytes, raw, base64 or hex, that seal project secrets in Postgres; without it secret set and jobs naming secrets are refused")
	fl.DurationVar(&opts.SSHCertTTL, "ssh-cert-ttl", 12*time.Hour, "Longest life of a user SSH certificate (never past the session)")
	fl.StringVar(&opts.StripeAPI, "stripe-api", payments.DefaultAPIBase, "Stripe API base URL")
	fl.StringVar(&opts.StripeSuccessURL, "stripe-success-url", "", "Where Stripe Checkout sends the browser after a paid top-up")
	fl.StringVar(&opts.StripeCancelURL, "stripe-cancel-url", "", "Where Stripe Checkout sends the browser after a cancelled top-up")
	fl.StringVar(&opts.HTTPAddr, "http-addr", "", "Address of the HTTP server for Stripe webhooks (host:port); empty: none")
	fl.IntVar(&opts.StreamReplicas, "jetstream-replicas", 1, "Copies JetStream keeps of the events and recordings streams (3 on a cluster of 3 NATS servers)")
	fl.Int64Var(&opts.Streams.EventsMaxBytes, "events-max-bytes", 1<<30, "Bytes the EVENTS stream keeps at most (the oldest events go first)")
	fl.DurationVar(&opts.Streams.EventsMaxAge, "events-max-age", 7*24*time.Hour, "How long the EVENTS stream keeps events (how long a client may be away and still catch up)")
	fl.Int64Var(&opts.Streams.RecordingsMaxBytes, "recordings-max-bytes", 10<<30, "Bytes the recordings stream keeps at most (when full, new recordings are refused)")
	fl.DurationVar(&opts.Streams.RecordingsMaxAge, "recordings-max-age", 90*24*time.Hour, "How long terminal recordings are kept (they cannot be deleted before)")
	fl.Int64Var(&opts.Streams.LogsMaxBytes, "logs-max-bytes", 1<<30, "Bytes the LOGS stream of jobs' output keeps at most (the oldest logs go first)")
	fl.DurationVar(&opts.Streams.LogsMaxAge, "logs-max-age", 7*24*time.Hour, "How long jobs' logs are kept (they outlive their allocation until then)")
	fl.Int64Var(&opts.Streams.JobLogMaxBytes, "job-log-max-bytes", 64<<20, "Bytes of one job's output kept in its log (past it, a marker line says it was cut)")
	fl.DurationVar(&opts.DrainTimeout, "drain-timeout", controld.DefaultDrainTimeout,
		"On SIGTERM, how long requests and node results in flight may take to finish before controld exits")
	fl.BoolVar(&opts.WebhookAllowPrivate, "webhook-allow-private", false,
		"Let webhook deliveries reach loopback, private and link-local addresses and this machine's own (receivers inside your network)")
	fl.StringSliceVar(&opts.WebhookDeny, "webhook-deny", nil, "Networks (CIDR) webhook deliveries never reach, whatever else allows them")
	fl.IntVar(&opts.WebhookMaxAttempts, "webhook-max-attempts", 12, "Attempts of a webhook delivery (backoff doubling from 10s to 1h) before it is dead")
	fl.StringVar(&opts.WebhookCAFile, "webhook-ca-file", "", "PEM certificates that verify webhook receivers instead of the system's roots")
	addMetricsFlag(fl, &opts.MetricsAddr)
	fl.StringVar(&opts.Registry, "registry", "", "OCI registry (host:port) images are verified against and imported into (docs/images.md)")
	fl.StringVar(&opts.RegistryCredentials, "registry-credentials", "", `The registry's credentials: a JSON file {"username": …, "password": …}`)
	fl.DurationVar(&opts.ImageVerifyTimeout, "image-verify-timeout", 30*time.Minute, "Longest time one verification of an image (every layer read from the registry) may take")
	opts.Settings.register(fl)
	cmd.AddCommand(NewCmdControldInitDB(f, nil))
	return cmd
}

func controldRun(ctx context.Context, opts *ControldOptions) error {
	log, err := newLogger(opts.IO.ErrOut, opts.LogLevel)
	if err != nil {
		return err
	}
	keys, err := bus.LoadKeys(opts.NATSKeys)
	if err != nil {
		return cmdutil.FlagErrorf("--nats-keys: %v", err)
	}
	conns, err := controlplane.ConnectControld(opts.NATS.URL, opts.NATS.tls(), keys, bus.LogConnection(log))
	if err != nil {
		return err
	}
	defer conns.Close()
	var kek []byte
	if opts.CAKeyFile != "" {
		if kek, err = os.ReadFile(opts.CAKeyFile); err != nil {
			return cmdutil.FlagErrorf("--ca-key-file: %v", err)
		}
		if len(kek) != 32 {
			return cmdutil.FlagErrorf("--ca-key-file must hold exactly 32 bytes, has %d (head -c 32 /dev/urandom > FILE)", len(kek))
		}
	}
	cfg := controldConfig(opts, conns, keys, kek, log)
	if opts.SecretsKeyFile != "" {
		if cfg.SecretsKey, err = secrets.LoadKeyFile(opts.SecretsKeyFile); err != nil {
			return cmdutil.FlagErrorf("--secrets-key-file: %v", err)
		}
	}
	if cfg.Webhooks, err = webhookSettings(opts); err != nil {
		return err
	}
	srv, err := controld.New(ctx, cfg)
	if err != nil {
		return roleSetupHint(err)
	}
	if opts.SeedCatalog {
		if _, err := srv.ApplySeed(ctx, controld.Seed{Catalog: catalog.Defaults}); err != nil {
			return err
		}
	}
	return srv.Run(ctx)
}

// controldConfig is controld's Config from the flags (and the environment
// they were read with).
func controldConfig(opts *ControldOptions, conns controlplane.Conns, keys *bus.Keys, kek []byte, log *slog.Logger) controld.Config {
	return controld.Config{DatabaseURL: opts.DatabaseURL, NATS: conns.NC, APINATS: conns.API, SystemNATS: conns.Sys, BusKeys: keys,
		Identity: identity.Settings{SessionTTL: opts.SessionTTL,
			OIDC: identity.OIDCConfig{Issuer: opts.OIDCIssuer, ClientID: opts.OIDCClientID, MaxIDTokenAge: opts.OIDCMaxTokenAge}},
		APIRateLimit: controld.RateLimit{Rate: opts.APIRate, Burst: opts.APIBurst}, Log: log,
		Billing: controld.BillingConfig{MinRunway: opts.MinRunway, SMTP: controld.SMTPConfig{Addr: opts.SMTPAddr,
			From: opts.SMTPFrom, Username: opts.SMTPUsername, Password: os.Getenv("GPUAAS_SMTP_PASSWORD")}},
		Idle:        controld.IdleConfig{MinPeriod: opts.IdleMinPeriod, WarnAhead: opts.IdleWarnAhead},
		GatewayAddr: opts.GatewayAddr, AppsURL: opts.AppsURL, CAKeyEncryptionKey: kek, SSHCertTTL: opts.SSHCertTTL,
		Stripe: payments.Settings{APIBase: opts.StripeAPI, SecretKey: os.Getenv("GPUAAS_STRIPE_SECRET_KEY"),
			WebhookSecret: os.Getenv("GPUAAS_STRIPE_WEBHOOK_SECRET"), SuccessURL: opts.StripeSuccessURL, CancelURL: opts.StripeCancelURL},
		HTTPAddr: opts.HTTPAddr, StreamReplicas: opts.StreamReplicas, Streams: opts.Streams, MetricsAddr: opts.MetricsAddr,
		DrainTimeout:       opts.DrainTimeout,
		Registry:           controld.RegistryConfig{Addr: opts.Registry, CredentialsFile: opts.RegistryCredentials},
		ImageVerifyTimeout: opts.ImageVerifyTimeout}
}
