package daemon

import (
	"crypto/x509"
	"net/netip"
	"os"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/webhooks"
)

// webhookDeny parses --webhook-deny.
func webhookDeny(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, cmdutil.FlagErrorf("--webhook-deny: %q is not a network (CIDR, e.g. 203.0.113.0/24)", c)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// webhookSettings are controld's webhook settings from the flags.
func webhookSettings(opts *ControldOptions) (controld.WebhookConfig, error) {
	deny, err := webhookDeny(opts.WebhookDeny)
	if err != nil {
		return controld.WebhookConfig{}, err
	}
	s := controld.WebhookConfig{Policy: webhooks.Policy{AllowPrivate: opts.WebhookAllowPrivate, Deny: deny},
		MaxAttempts: opts.WebhookMaxAttempts}
	if opts.WebhookCAFile != "" {
		pem, err := os.ReadFile(opts.WebhookCAFile)
		if err != nil {
			return s, cmdutil.FlagErrorf("--webhook-ca-file: %v", err)
		}
		s.RootCAs = x509.NewCertPool()
		if !s.RootCAs.AppendCertsFromPEM(pem) {
			return s, cmdutil.FlagErrorf("--webhook-ca-file: %s holds no PEM certificate", opts.WebhookCAFile)
		}
	}
	return s, nil
}
