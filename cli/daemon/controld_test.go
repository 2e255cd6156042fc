package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
)

// TestControldFlagsReachConfig: every tuning flag of `gpuaas controld`
// ends up in controld's Config (the regression: --api-rate, --api-burst
// and --oidc-max-token-age were parsed and then dropped).
func TestControldFlagsReachConfig(t *testing.T) {
	t.Setenv("GPUAAS_SMTP_PASSWORD", "s3cret")
	for _, env := range []string{"GPUAAS_DATABASE_URL", "GPUAAS_NATS_URL", "GPUAAS_NATS_KEYS", "GPUAAS_NATS_CA",
		"GPUAAS_NATS_CERT", "GPUAAS_NATS_KEY"} {
		t.Setenv(env, "")
	}
	ios, _, _, _ := cmdutil.Test()
	var got *ControldOptions
	cmd := NewCmdControld(cmdtest.Factory(ios), func(_ context.Context, o *ControldOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--database-url", "postgres://db/x", "--nats-keys", "/k", "--api-rate", "7", "--api-burst", "9",
		"--oidc-issuer", "https://idp.test", "--oidc-client-id", "cli", "--oidc-max-token-age", "90s",
		"--session-ttl", "2h", "--ssh-cert-ttl", "1h", "--gateway-addr", "gw.test:22", "--apps-url", "https://*.apps.test", "--http-addr", "127.0.0.1:0",
		"--min-runway", "25m", "--jetstream-replicas", "3", "--metrics-addr", "127.0.0.1:9464",
		"--drain-timeout", "7s", "--smtp-addr", "mail.test:587", "--smtp-from", "gpuaas@example.test", "--smtp-username", "relay"})
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	cfg := controldConfig(got, controlplane.Conns{}, nil, nil, nil)
	checks := []struct {
		name      string
		got, want any
	}{
		{"database", cfg.DatabaseURL, "postgres://db/x"},
		{"api rate", cfg.APIRateLimit.Rate, 7.0},
		{"api burst", cfg.APIRateLimit.Burst, 9},
		{"oidc issuer", cfg.Identity.OIDC.Issuer, "https://idp.test"},
		{"oidc client", cfg.Identity.OIDC.ClientID, "cli"},
		{"oidc max token age", cfg.Identity.OIDC.MaxIDTokenAge, 90 * time.Second},
		{"session ttl", cfg.Identity.SessionTTL, 2 * time.Hour},
		{"ssh cert ttl", cfg.SSHCertTTL, time.Hour},
		{"gateway", cfg.GatewayAddr, "gw.test:22"},
		{"apps url", cfg.AppsURL, "https://*.apps.test"},
		{"http", cfg.HTTPAddr, "127.0.0.1:0"},
		{"min runway", cfg.Billing.MinRunway, 25 * time.Minute},
		{"jetstream replicas", cfg.StreamReplicas, 3},
		{"metrics", cfg.MetricsAddr, "127.0.0.1:9464"},
		{"drain timeout", cfg.DrainTimeout, 7 * time.Second},
		{"smtp addr", cfg.Billing.SMTP.Addr, "mail.test:587"},
		{"smtp from", cfg.Billing.SMTP.From, "gpuaas@example.test"},
		{"smtp user", cfg.Billing.SMTP.Username, "relay"},
		{"smtp password", cfg.Billing.SMTP.Password, "s3cret"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v; want %v", c.name, c.got, c.want)
		}
	}
}

// TestControldMinRunwayMustBePositive: a zero or negative minimum runway
// would let a project at $0 rent; it is a usage error, not a default.
func TestControldMinRunwayMustBePositive(t *testing.T) {
	for _, v := range []string{"0s", "-1m"} {
		ios, _, _, _ := cmdutil.Test()
		cmd := NewCmdControld(cmdtest.Factory(ios), func(context.Context, *ControldOptions) error { return nil })
		cmd.SetArgs([]string{"--database-url", "postgres://db/x", "--nats-keys", "/k", "--min-runway=" + v})
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		if cmdutil.ExitCodeOf(err) != cmdutil.ExitUsage || err == nil || !strings.Contains(err.Error(), "--min-runway must be positive") {
			t.Errorf("--min-runway=%s: got %v; want a usage error", v, err)
		}
	}
}

// TestDrainTimeoutMustBePositive: controld and hostd refuse a zero or
// negative --drain-timeout (no drain at all would lose what is in flight)
// as a usage error, before anything runs.
func TestDrainTimeoutMustBePositive(t *testing.T) {
	t.Setenv("GPUAAS_DATABASE_URL", "")
	t.Setenv("GPUAAS_NATS_KEYS", "")
	for _, v := range []string{"0s", "-1s"} {
		for _, daemon := range []string{"controld", "hostd"} {
			ios, _, _, _ := cmdutil.Test()
			f := cmdtest.Factory(ios)
			ran := false
			cmd := NewCmdControld(f, func(context.Context, *ControldOptions) error { ran = true; return nil })
			args := []string{"--database-url", "postgres://db/x", "--nats-keys", "/k"}
			if daemon == "hostd" {
				cmd = NewCmdHostd(f, func(context.Context, *HostdOptions) error { ran = true; return nil })
				args = nil
			}
			cmd.SetArgs(append(args, "--drain-timeout="+v))
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if ran || cmdutil.ExitCodeOf(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "--drain-timeout must be positive") {
				t.Errorf("%s --drain-timeout=%s: got %v (ran %t); want a usage error", daemon, v, err, ran)
			}
		}
	}
}

// TestControldSMTPFlagsNeedEachOther: a relay without a sender, or
// credentials without a relay, are usage errors, not silently no email.
func TestControldSMTPFlagsNeedEachOther(t *testing.T) {
	for _, tc := range []struct {
		name, password string
		args           []string
		want           string
	}{
		{name: "relay without sender", args: []string{"--smtp-addr", "mail.test:25"}, want: "--smtp-from"},
		{name: "user without relay", args: []string{"--smtp-username", "relay"}, want: "need --smtp-addr"},
		{name: "password without relay", password: "x", want: "need --smtp-addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GPUAAS_SMTP_PASSWORD", tc.password)
			ios, _, _, _ := cmdutil.Test()
			ran := false
			cmd := NewCmdControld(cmdtest.Factory(ios), func(context.Context, *ControldOptions) error { ran = true; return nil })
			cmd.SetArgs(append([]string{"--database-url", "postgres://db/x", "--nats-keys", "/k"}, tc.args...))
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if err == nil || ran || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (ran %v); want a usage error naming %s", err, ran, tc.want)
			}
		})
	}
}
