package daemon

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/cli/cmdutil"

	"github.com/gpuaas/gpuaas/sshgate"
)

// addHTTPSFlags registers the HTTPS front's flags (and so their keys in
// --config): off unless --https-listen is given (docs/expose.md).
func addHTTPSFlags(fl *pflag.FlagSet, h *sshgate.HTTPS) {
	fl.StringVar(&h.Listen, "https-listen", "", "Address to serve exposures over HTTPS on, e.g. :443 (empty: no HTTPS front)")
	fl.StringVar(&h.Domain, "https-domain", "", "Apps domain: exposures are served at https://<port>-<alloc>.DOMAIN")
	fl.StringVar(&h.CertFile, "https-cert", "", "PEM certificate for *.DOMAIN (with --https-key; or --https-acme-ca)")
	fl.StringVar(&h.KeyFile, "https-key", "", "PEM key of --https-cert")
	fl.StringVar(&h.ACME.CA, "https-acme-ca", "", "ACME directory URL to obtain a certificate per exposure name from, at its first TLS handshake, by TLS-ALPN-01 on --https-listen (instead of --https-cert), e.g. https://acme-v02.api.letsencrypt.org/directory")
	fl.StringVar(&h.ACME.Email, "https-acme-email", "", "Contact address of the ACME account")
	fl.StringVar(&h.ACME.CARootFile, "https-acme-ca-root", "", "PEM roots to trust for the ACME CA's own HTTPS endpoint (a private CA; default: the system's)")
	fl.StringVar(&h.ACME.Dir, "https-acme-dir", "/var/lib/gpuaas/sshgate/acme", "Directory keeping ACME certificates, their keys and the account key (created 0700)")
	fl.StringVar(&h.CookieKeyFile, "https-cookie-key-file", "", "File (0600) holding the key that signs the front's login cookies, at least 32 bytes (openssl rand -base64 48); replicas given the same file accept each other's cookies (default: a random key per start)")
}

// checkHTTPSFlags refuses an HTTPS front it could not start.
func checkHTTPSFlags(h *sshgate.HTTPS) error {
	if h.Listen == "" {
		return nil
	}
	acme, files := h.ACME.CA != "", h.CertFile != "" || h.KeyFile != ""
	switch {
	case h.Domain == "":
		return cmdutil.FlagErrorf("--https-listen needs --https-domain")
	case acme && files:
		return cmdutil.FlagErrorf("--https-acme-ca and --https-cert/--https-key are alternatives: give one")
	case !acme && (h.CertFile == "" || h.KeyFile == ""):
		return cmdutil.FlagErrorf("--https-listen needs --https-cert and --https-key, or --https-acme-ca")
	case acme && !strings.HasPrefix(h.ACME.CA, "https://"):
		return cmdutil.FlagErrorf("--https-acme-ca: %q is not an https URL (an ACME directory, e.g. https://acme-v02.api.letsencrypt.org/directory)", h.ACME.CA)
	case acme && h.ACME.Dir == "":
		return cmdutil.FlagErrorf("--https-acme-ca needs --https-acme-dir")
	}
	return nil
}
