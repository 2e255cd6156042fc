package daemon

import (
	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/cli/cmdutil"

	"github.com/gpuaas/gpuaas/sshgate"
)

// addHTTPSFlags registers the HTTPS front's flags (and so their keys in
// --config): off unless --https-listen is given (docs/expose.md).
func addHTTPSFlags(fl *pflag.FlagSet, h *sshgate.HTTPS) {
	fl.StringVar(&h.Listen, "https-listen", "", "Address to serve exposures over HTTPS on, e.g. :443 (empty: no HTTPS front)")
	fl.StringVar(&h.Domain, "https-domain", "", "Apps domain: exposures are served at https://<port>-<alloc>.DOMAIN")
	fl.StringVar(&h.CertFile, "https-cert", "", "PEM certificate for *.DOMAIN (with --https-key)")
	fl.StringVar(&h.KeyFile, "https-key", "", "PEM key of --https-cert")
}

// checkHTTPSFlags refuses an HTTPS front it could not start.
func checkHTTPSFlags(h *sshgate.HTTPS) error {
	if h.Listen == "" {
		return nil
	}
	if h.Domain == "" || h.CertFile == "" || h.KeyFile == "" {
		return cmdutil.FlagErrorf("--https-listen needs --https-domain, --https-cert and --https-key")
	}
	return nil
}
