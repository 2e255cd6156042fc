package daemon

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/devenv"
)

// TestDevStripeOffByDefault: without --stripe-api the platform has no
// Stripe; an --stripe-api that is not an http(s) URL is a usage error.
func TestDevStripeOffByDefault(t *testing.T) {
	if cfg := devConfig(&DevOptions{}, func(string) string { return "" }); cfg.StripeAPI != "" {
		t.Fatalf("got Stripe API %q; want Stripe off", cfg.StripeAPI)
	}
	ios, _, _, _ := cmdutil.Test()
	cmd := NewCmdDev(cmdtest.Factory(ios), nil, func(context.Context, *DevOptions) error { return nil })
	cmd.SetArgs([]string{"--data", t.TempDir(), "--stripe-api", "127.0.0.1:12111"})
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	var fe *cmdutil.FlagError
	if err := cmd.Execute(); !errors.As(err, &fe) {
		t.Errorf("URL without scheme: got %v; want a usage error", err)
	}
}

// TestDevStripeCredentialsFromEnvironment: GPUAAS_STRIPE_SECRET_KEY and
// GPUAAS_STRIPE_WEBHOOK_SECRET replace the test key, which is used
// without them, and the data directory's own webhook secret.
func TestDevStripeCredentialsFromEnvironment(t *testing.T) {
	opts := &DevOptions{Config: devenv.Config{DataDir: t.TempDir(), StripeAPI: "http://127.0.0.1:12111"}}
	cfg := devConfig(opts, func(string) string { return "" })
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	// No webhook secret: the platform makes one for its data directory.
	if cfg.StripeSecretKey != devenv.DefaultStripeSecretKey || cfg.StripeWebhookSecret != "" {
		t.Errorf("got key %q, webhook secret %q; want the dev key and no secret", cfg.StripeSecretKey, cfg.StripeWebhookSecret)
	}
	env := map[string]string{"GPUAAS_STRIPE_SECRET_KEY": "sk_test_fromenv", "GPUAAS_STRIPE_WEBHOOK_SECRET": "whsec_fromenv"}
	cfg = devConfig(opts, func(k string) string { return env[k] })
	if cfg.StripeSecretKey != "sk_test_fromenv" || cfg.StripeWebhookSecret != "whsec_fromenv" {
		t.Errorf("got key %q, webhook secret %q; want the environment's", cfg.StripeSecretKey, cfg.StripeWebhookSecret)
	}
}
