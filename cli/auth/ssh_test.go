package auth

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// loginAgainst logs in to the controld stand-in with --password-stdin and
// returns the context's SSH paths and stderr.
func loginAgainst(t *testing.T, ctrl *sshkeystest.Controld, cfg *clientconfig.Config, clock *testutil.Clock) (sshkeys.Paths, string) {
	t.Helper()
	ios, in, _, errOut := cmdtest.Streams(false)
	in.WriteString("hunter2\n")
	opts := &LoginOptions{IO: ios, Email: sshkeystest.Email, PasswordStdin: true, Now: clock.Now,
		Config: func() (*clientconfig.Config, error) { return cfg, nil },
		Active: func() (clientconfig.Active, error) { return cfg.Active(clientconfig.Overrides{Context: "dev"}), nil },
		// The client of before the login: no token.
		Client: func() (*api.Client, error) { return ctrl.Client(""), nil },
	}
	if err := loginRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	return sshkeys.For(filepath.Dir(cfg.Path()), "dev"), errOut.String()
}

func TestLoginIssuesSSHCertificate(t *testing.T) {
	clock := testutil.NewClock(now)
	ctrl := sshkeystest.Start(t, clock.Now)
	ios, _, _, _ := cmdtest.Streams(false)
	_, cfg := cmdtest.ConfigFactory(t, ios, &clientconfig.Context{Server: ctrl.URL})

	p, stderr := loginAgainst(t, ctrl, cfg, clock)
	if !strings.Contains(stderr, "SSH certificate for "+p.Key+" valid until") {
		t.Errorf("got stderr %q; want the certificate reported", stderr)
	}
	key1, _ := os.ReadFile(p.Key)
	if st, err := os.Stat(p.Key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("got key %v, %v; want it 0600", st, err)
	}
	cert, err := sshkeys.ReadCert(p.Cert)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cert.Key.Marshal(), signer.PublicKey().Marshal()) || cert.ValidPrincipals[0] != sshkeystest.UserID {
		t.Errorf("got a certificate for %v; want one for the key and user %s", cert.ValidPrincipals, sshkeystest.UserID)
	}

	// Logging in again, still valid: same key, new certificate.
	clock.Advance(time.Minute)
	loginAgainst(t, ctrl, cfg, clock)
	key2, _ := os.ReadFile(p.Key)
	if !bytes.Equal(key1, key2) {
		t.Error("got a new key on the second login; want it reused")
	}
	if ctrl.Signed() != 2 {
		t.Errorf("got %d certificates signed; want one per login", ctrl.Signed())
	}

	// Logout drops the certificate and keeps the key.
	ios, _, _, _ = cmdtest.Streams(false)
	lo := &LogoutOptions{IO: ios, Config: func() (*clientconfig.Config, error) { return cfg, nil },
		Active: func() (clientconfig.Active, error) { return cfg.Active(clientconfig.Overrides{Context: "dev"}), nil },
		Client: func() (*api.Client, error) { return ctrl.Client(sshkeystest.Token), nil }}
	ctrl.Handle(t, api.EndpointAuthLogout, func(*nats.Msg) (any, error) { return api.LogoutResponse{}, nil })
	if err := logoutRun(context.Background(), lo); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.Cert); !os.IsNotExist(err) {
		t.Errorf("got certificate still there (%v); want it removed", err)
	}
	if _, err := os.Stat(p.Key); err != nil {
		t.Errorf("got key gone (%v); want it kept", err)
	}
}

func TestLoginSucceedsWithoutSSHCertificate(t *testing.T) {
	clock := testutil.NewClock(now)
	ctrl := sshkeystest.Start(t, clock.Now)
	ctrl.Handle(t, api.EndpointSSHCert, func(*nats.Msg) (any, error) {
		return nil, &api.Error{Code: api.CodeInternal, Message: "CA unavailable"}
	})
	ios, _, _, _ := cmdtest.Streams(false)
	_, cfg := cmdtest.ConfigFactory(t, ios, &clientconfig.Context{Server: ctrl.URL})
	_, stderr := loginAgainst(t, ctrl, cfg, clock)
	if !strings.Contains(stderr, "warning: no SSH certificate yet: sign ssh certificate: CA unavailable") {
		t.Errorf("got stderr %q; want a warning", stderr)
	}
	if c, _ := cfg.Context("dev"); c.Token != sshkeystest.Token {
		t.Errorf("got token %q; want the session stored anyway", c.Token)
	}
}
