package controld_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// newSSHKey returns a fresh ed25519 public key in authorized_keys format.
func newSSHKey(t *testing.T) (ssh.PublicKey, string) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k, string(ssh.MarshalAuthorizedKey(k))
}

func parseCert(t *testing.T, line string) *ssh.Certificate {
	t.Helper()
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatalf("parse certificate %q: %v", line, err)
	}
	cert, ok := k.(*ssh.Certificate)
	if !ok {
		t.Fatalf("got a %s key; want a certificate", k.Type())
	}
	return cert
}

func trusted(t *testing.T, lines []string) []ssh.PublicKey {
	t.Helper()
	keys, err := sshcert.ParseTrusted([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatalf("parse trusted keys %q: %v", lines, err)
	}
	return keys
}

// gatewayClient registers a gateway key and returns the gateway's client,
// logging in with it as sshgate does.
func gatewayClient(t *testing.T, env *controldtest.Env) *api.Client {
	t.Helper()
	return env.GatewayClient(t, "sshgate")
}

func TestSSHCertIssue(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, SSHCertTTL: 24 * time.Hour, GatewayAddr: "gw.example.test:2222"})
	ctx := t.Context()
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	c := env.Client(bobToken)
	who, err := c.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pub, line := newSSHKey(t)
	resp, err := c.SSHCert(ctx, api.SSHCertRequest{PublicKey: line})
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCert(t, resp.Certificate)
	if string(cert.Key.Marshal()) != string(pub.Marshal()) {
		t.Error("the certificate is for another key")
	}
	cas, err := env.Client("").SSHCAs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cas.Gateway != "gw.example.test:2222" || len(cas.User) != 1 || len(cas.Host) != 1 || len(cas.Internal) != 0 {
		t.Fatalf("ssh.cas got %+v; want one user and one host key, no internal keys, the gateway", cas)
	}
	id, err := sshcert.VerifyUser(trusted(t, cas.User), cert, "", time.Now())
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if id.UserID != bob.ID || id.KeyID != bob.Email {
		t.Errorf("got principal %q key id %q; want %q %q", id.UserID, id.KeyID, bob.ID, bob.Email)
	}
	// The configured TTL (24h) is longer than the session (12h): the
	// session's end wins.
	if id.ValidBefore.After(who.ExpiresAt) || !resp.ValidBefore.Equal(id.ValidBefore) {
		t.Errorf("valid before %s (response %s); want at most the session's end %s", id.ValidBefore, resp.ValidBefore, who.ExpiresAt)
	}
	if who.ExpiresAt.Sub(id.ValidBefore) > time.Second {
		t.Errorf("valid before %s; want the session's end %s", id.ValidBefore, who.ExpiresAt)
	}
	if _, err := sshcert.VerifyUser(trusted(t, cas.Host), cert, "", time.Now()); !errors.Is(err, sshcert.ErrUntrustedCA) {
		t.Errorf("verify against the host CA got %v; want untrusted", err)
	}
	var audits int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = 'ssh.cert_issue' AND target_id = $1`,
		bob.ID).Scan(&audits); err != nil || audits != 1 {
		t.Errorf("got %d ssh.cert_issue audit rows (%v); want 1", audits, err)
	}
}

func TestSSHCertTTLCapsValidity(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, SSHCertTTL: time.Hour})
	_, line := newSSHKey(t)
	before := time.Now()
	resp, err := env.Client(env.AdminToken).SSHCert(t.Context(), api.SSHCertRequest{PublicKey: line})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.ValidBefore.Sub(before); d > time.Hour+time.Second || d < time.Hour-time.Minute {
		t.Errorf("valid for %s; want about an hour", d)
	}
}

func TestSSHCertRefusesBadKeys(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	c := env.Client(env.AdminToken)
	_, line := newSSHKey(t)
	issued, err := c.SSHCert(ctx, api.SSHCertRequest{PublicKey: line})
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	smallPub, err := ssh.NewPublicKey(&small.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  string
		c    *api.Client
		want error
	}{
		{"a certificate", issued.Certificate, c, api.ErrInvalidArgument},
		{"rsa 2048", string(ssh.MarshalAuthorizedKey(smallPub)), c, api.ErrInvalidArgument},
		{"garbage", "ssh-ed25519 bm90IGEga2V5", c, api.ErrInvalidArgument},
		{"empty", "", c, api.ErrInvalidArgument},
		{"private key", "-----BEGIN OPENSSH PRIVATE KEY-----", c, api.ErrInvalidArgument},
		{"not logged in", line, env.Client(""), api.ErrUnauthenticated},
		{"service principal", line, gatewayClient(t, env), api.ErrForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.c.SSHCert(ctx, api.SSHCertRequest{PublicKey: tt.key}); !errors.Is(err, tt.want) {
				t.Errorf("got %v; want %v", err, tt.want)
			}
		})
	}
}

func TestSSHCAsInternalKeys(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	_, opToken := env.AddUser(t, "op@example.test", api.RoleOperator)
	tests := []struct {
		name         string
		c            *api.Client
		wantInternal bool
		wantErr      error
	}{
		{"anonymous", env.Client(""), false, nil},
		{"user", env.Client(bobToken), false, nil},
		{"operator", env.Client(opToken), true, nil},
		{"gateway", gatewayClient(t, env), true, nil},
		{"stale or bad token: served as anonymous", env.Client("not-a-token"), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cas, err := tt.c.SSHCAs(ctx)
			if !errors.Is(err, tt.wantErr) || (err == nil && (len(cas.Internal) > 0) != tt.wantInternal) {
				t.Errorf("got %+v, %v; want internal keys %v, error %v", cas, err, tt.wantInternal, tt.wantErr)
			}
		})
	}
}
