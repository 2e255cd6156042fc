package devenv

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/payments"
)

// stripe configures Stripe when Config.StripeAPI is set: the API base,
// the test key, the webhook secret (Config's, or the data directory's
// own), controld's HTTP server on loopback (its address is returned) and
// Checkout pages served by it. Without StripeAPI Stripe is off.
//
// Who can reach the webhook: it listens on 127.0.0.1 only, so nothing
// off this machine can. Allocations' sessions on this machine can: the
// sim hosts' users (Config.SystemUsers) are POSIX users here, and loopback
// is open to every local user. What keeps them from crediting anything
// is the signing secret: it is in a file of the data directory that only
// this process's user may read (0600 in a 0700 or 0711 directory), and
// sim users are other users. Without SystemUsers sessions run as this
// process's user and are not isolated from anything it has (the banner
// says so).
func (e *Env) stripe() (payments.Settings, string, error) {
	if e.cfg.StripeAPI == "" {
		return payments.Settings{}, "", nil
	}
	secret := e.cfg.StripeWebhookSecret
	if secret == "" {
		var err error
		e.WebhookSecretFile = filepath.Join(e.cfg.DataDir, WebhookSecretFile)
		if secret, err = webhookSecret(e.WebhookSecretFile); err != nil {
			return payments.Settings{}, "", fmt.Errorf("stripe webhook secret: %w", err)
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(e.cfg.HTTPPort)))
	if err != nil {
		return payments.Settings{}, "", fmt.Errorf("stripe webhooks: cannot listen on 127.0.0.1:%d: %w", e.cfg.HTTPPort, err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return payments.Settings{}, "", err
	}
	base := "http://" + addr
	e.WebhookURL = base + controld.StripeWebhookPath
	s := payments.Settings{
		APIBase:       e.cfg.StripeAPI,
		SecretKey:     e.cfg.StripeSecretKey,
		WebhookSecret: secret,
		SuccessURL:    fmt.Sprintf("%s%s?session_id={CHECKOUT_SESSION_ID}", base, controld.TopupDonePath),
		CancelURL:     base + controld.TopupCancelledPath,
	}
	return s, addr, nil
}

// webhookSecret reads the webhook secret kept in path, first making one
// (whsec_ and 32 random bytes, as Stripe's look) when there is none. The
// file is this user's only: one that others may read is refused, as its
// secret may have leaked.
func webhookSecret(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		b := make([]byte, 32)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		secret := "whsec_" + base64.StdEncoding.EncodeToString(b)
		_, werr := f.WriteString(secret + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path)
			return "", werr
		}
		return secret, nil
	case !errors.Is(err, fs.ErrExist):
		return "", err
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable by others (mode %v); remove it and a new secret is made", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	secret := strings.TrimSpace(string(b))
	if !strings.HasPrefix(secret, "whsec_") || len(secret) < len("whsec_")+16 {
		return "", fmt.Errorf("%s does not hold a webhook secret (whsec_…)", path)
	}
	return secret, nil
}
