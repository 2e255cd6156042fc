package devenv

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/cmdmode"
)

// The seeded platform.
const (
	// AdminEmail is the local admin every environment has.
	AdminEmail = "admin@localhost"
	// Project is the admin's project.
	Project = "dev"
	// CreditMinor is the project's initial credit: $100.
	CreditMinor = 100_00
	// Database is the database controld uses in the private cluster.
	Database = "gpuaas"
	// MaxHosts is the most simulated hosts an environment runs.
	MaxHosts = 64
	// ClusterServers and ControldReplicas are what Config.Cluster runs.
	ClusterServers   = 3
	ControldReplicas = 2
)

// DefaultStripeSecretKey is the Stripe test key used when Config gives
// none: stripe-mock accepts any sk_test_ key of letters and digits. There
// is no default webhook secret: a published one would let anyone who can
// reach the webhook credit any top-up (see WebhookSecretFile).
const DefaultStripeSecretKey = "sk_test_gpuaasdev"

// WebhookSecretFile is the file in the data directory holding the Stripe
// webhook signing secret made for it (random, 0600) when Config gives
// none.
const WebhookSecretFile = "stripe-webhook-secret"

// SecretsKeyFile is the file in the data directory holding the key that
// seals project secrets (controld --secrets-key-file; made on first
// start, 0600).
const SecretsKeyFile = "secrets.key"

// Defaults filled in by CheckAndSetDefaults.
const (
	DefaultSessionTTL    = 12 * time.Hour
	DefaultBillingWindow = 10 * time.Second
	DefaultIdleMinPeriod = 10 * time.Second
)

// Config is the platform to run.
type Config struct {
	// DataDir holds everything the platform keeps: pg/ (PostgreSQL),
	// nats/ (JetStream), nats-keys/ (the trust model's keys), hosts/<name>/
	// (each sim host's state) and sshgate/ (the gateway's keys). A later
	// Start on the same directory carries on where the last one stopped.
	// Required.
	DataDir string
	// Reset deletes DataDir first, to start from scratch.
	Reset bool
	// DatabaseURL, when set, is the (empty or earlier) database controld
	// uses instead of a private PostgreSQL cluster in DataDir/pg; tests
	// pass a clone of a migrated template.
	DatabaseURL string

	// NATSHost and NATSPort are where the embedded NATS server listens
	// (default 127.0.0.1, and any free port for 0).
	NATSHost string
	NATSPort int
	// Cluster runs ClusterServers NATS servers in a cluster instead of
	// one, each on a free port of NATSHost (NATSPort must be 0), with
	// JetStream keeping ClusterServers copies of the events stream and
	// recordings, and ControldReplicas controld replicas: HA tried on
	// one machine. Their JetStream data is in DataDir/nats-cluster.
	Cluster bool
	// SSHPort is where the SSH gateway listens on loopback (0: any free
	// port).
	SSHPort int
	// HTTPSPort is where the gateway's HTTPS front listens on loopback,
	// serving exposures at https://<port>-<allocation>.localhost:HTTPSPort
	// (0: any free port).
	HTTPSPort int
	// HTTPSACMECA, when set, is an ACME directory (https) the HTTPS front
	// obtains a certificate per exposure name from, at its first
	// handshake, by TLS-ALPN-01 on HTTPSPort, instead of the dev CA;
	// HTTPSACMECARoot is a PEM file of roots for that CA's own endpoint
	// (a test CA such as Pebble's). Kept in DataDir/https-acme
	// (docs/expose.md).
	HTTPSACMECA, HTTPSACMECARoot string
	// WebhookCAFile, when set, holds PEM certificates that verify webhook
	// receivers instead of the system's roots: an HTTPS receiver on this
	// machine with a CA of its own (docs/webhooks.md).
	WebhookCAFile string

	// AdminPassword, when set, is the admin's password: set at the first
	// start and again at every later one. Empty: the first start
	// generates one (Env.AdminPassword) and later starts keep it.
	AdminPassword string
	// SessionTTL is the lifetime of session tokens (default
	// DefaultSessionTTL).
	SessionTTL time.Duration
	// OIDC, when its Issuer is set, lets people log in through that
	// identity provider as well.
	OIDC identity.OIDCConfig
	// BillingWindow is how often active allocations are charged (default
	// DefaultBillingWindow: short, so the balance visibly falls).
	BillingWindow time.Duration
	// IdleMinPeriod is the shortest idle period or maximum duration users
	// may set (default DefaultIdleMinPeriod: seconds, to try idle release).
	IdleMinPeriod time.Duration

	// Hosts is how many simulated GPU hosts run: slice and bare-metal
	// hosts, alternately (0 to MaxHosts).
	Hosts int
	// SystemUsers makes the sim hosts' users real unprivileged POSIX
	// accounts (sim.Options.SystemUsers), so renters' sessions are
	// isolated from this process. It needs root.
	SystemUsers bool
	// VM, when set, makes the first slice host boot real guests through
	// libvirtd, from this guest image: VMImageMinimal or VMImageDebian
	// (vmhost.go). Needs root, libvirt and QEMU; guests run under TCG.
	VM string

	// Commands and TUI are the gateway's command mode (see
	// sshgate.Config); nil leaves it off.
	Commands cmdmode.Server
	TUI      cmdmode.Server

	// StripeAPI, when set, enables top-ups against this Stripe API base
	// (stripe-mock, or Stripe's test mode) and starts controld's HTTP
	// server for its webhooks on loopback, on HTTPPort (0: any free
	// port). StripeSecretKey defaults to DefaultStripeSecretKey;
	// StripeWebhookSecret to a random secret made once per data directory
	// and kept in DataDir/WebhookSecretFile (0600).
	StripeAPI           string
	StripeSecretKey     string
	StripeWebhookSecret string
	HTTPPort            int

	// Log receives every part's logs. Default: discard.
	Log *slog.Logger
}

// CheckAndSetDefaults fails on missing or invalid fields and fills in the
// defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.DataDir == "" {
		return errors.New("devenv: DataDir is required")
	}
	if !filepath.IsAbs(c.DataDir) {
		return fmt.Errorf("devenv: DataDir %q is not absolute", c.DataDir)
	}
	if c.Hosts < 0 || c.Hosts > MaxHosts {
		return fmt.Errorf("devenv: Hosts must be 0-%d, got %d", MaxHosts, c.Hosts)
	}
	if err := checkVM(c); err != nil {
		return err
	}
	for _, p := range []struct {
		name string
		port int
	}{{"NATSPort", c.NATSPort}, {"SSHPort", c.SSHPort}, {"HTTPPort", c.HTTPPort}, {"HTTPSPort", c.HTTPSPort}} {
		if p.port < 0 || p.port > 65535 {
			return fmt.Errorf("devenv: %s must be 0-65535, got %d", p.name, p.port)
		}
	}
	if c.Cluster && c.NATSPort != 0 {
		return errors.New("devenv: NATSPort must be 0 with Cluster: the servers take free ports")
	}
	if (c.OIDC.Issuer == "") != (c.OIDC.ClientID == "") {
		return errors.New("devenv: OIDC Issuer and ClientID go together")
	}
	if c.StripeAPI != "" {
		if err := CheckStripeAPI(c.StripeAPI); err != nil {
			return fmt.Errorf("devenv: StripeAPI: %w", err)
		}
	}
	if c.HTTPSACMECA != "" && !strings.HasPrefix(c.HTTPSACMECA, "https://") {
		return fmt.Errorf("devenv: HTTPSACMECA %q is not an https URL (an ACME directory)", c.HTTPSACMECA)
	}
	if c.HTTPSACMECARoot != "" && c.HTTPSACMECA == "" {
		return errors.New("devenv: HTTPSACMECARoot needs HTTPSACMECA")
	}
	if c.NATSHost == "" {
		c.NATSHost = "127.0.0.1"
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.BillingWindow <= 0 {
		c.BillingWindow = DefaultBillingWindow
	}
	if c.IdleMinPeriod <= 0 {
		c.IdleMinPeriod = DefaultIdleMinPeriod
	}
	if c.StripeSecretKey == "" {
		c.StripeSecretKey = DefaultStripeSecretKey
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// CheckStripeAPI says whether u can be a Stripe API base: an http(s) URL
// with a host.
func CheckStripeAPI(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("want an http(s) URL such as http://127.0.0.1:12111, got %q", u)
	}
	return nil
}
