package sshgate

import (
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestAuthRefusals: only a user certificate of the user CA, inside its
// window, for exactly one principal that is a user id, with no critical
// options, gets in; every other credential is refused at the handshake.
func TestAuthRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	owner := e.newUser()
	alloc := e.addAlloc(owner)
	// controld's user CA, for certificates it would not mint itself.
	userCA := e.authority(api.CAUser)
	userCAKey := sshtest.SignerOf(t, e.caKey(api.CAUser))
	now := time.Now()
	fresh := func() gossh.Signer { return sshtest.NewSigner(t) }
	userCert := func(ca *sshcert.Authority, id string, at time.Time) func() gossh.AuthMethod {
		return func() gossh.AuthMethod {
			k := fresh()
			c, err := ca.SignUser(k.PublicKey(), sshcert.UserCert{UserID: id, KeyID: "x@example.test", MaxTTL: time.Hour}, at)
			if err != nil {
				t.Fatal(err)
			}
			return gossh.PublicKeys(sshtest.CertSigner(t, c, k))
		}
	}
	crafted := func(cert gossh.Certificate) func() gossh.AuthMethod {
		return func() gossh.AuthMethod {
			k := fresh()
			cert.Key = k.PublicKey()
			cert.Serial = 42
			if err := cert.SignCert(rand.Reader, userCAKey); err != nil {
				t.Fatal(err)
			}
			return gossh.PublicKeys(sshtest.CertSigner(t, &cert, k))
		}
	}
	window := func(after, before time.Duration) (uint64, uint64) {
		return uint64(now.Add(after).Unix()), uint64(now.Add(before).Unix())
	}
	va, vb := window(-time.Minute, time.Hour)
	userID := owner.id // a real user, whose certificate is what is wrong
	ext := map[string]string{sshcert.ExtensionPermitPTY: ""}

	tests := []struct {
		name string
		auth func() gossh.AuthMethod
	}{
		{"expired certificate", userCert(userCA, userID, now.Add(-2*time.Hour))},
		{"not yet valid certificate", userCert(userCA, userID, now.Add(2*time.Hour))},
		{"certificate from another CA", userCert(sshtest.NewAuthority(t, "user"), userID, now)},
		{"host certificate as user certificate", crafted(gossh.Certificate{CertType: gossh.HostCert,
			ValidPrincipals: []string{userID}, ValidAfter: va, ValidBefore: vb})},
		{"principal that is not a user id", userCert(userCA, "root", now)},
		{"principal that is an allocation id", userCert(userCA, alloc, now)},
		{"two principals", crafted(gossh.Certificate{CertType: gossh.UserCert, ValidPrincipals: []string{userID, ids.New(ids.User)},
			ValidAfter: va, ValidBefore: vb, Permissions: gossh.Permissions{Extensions: ext}})},
		{"critical option (a ticket's)", crafted(gossh.Certificate{CertType: gossh.UserCert, ValidPrincipals: []string{userID},
			ValidAfter: va, ValidBefore: vb, Permissions: gossh.Permissions{
				CriticalOptions: map[string]string{sshcert.OptionNode: "n-1"}, Extensions: ext}})},
		{"source-address option", crafted(gossh.Certificate{CertType: gossh.UserCert, ValidPrincipals: []string{userID},
			ValidAfter: va, ValidBefore: vb, Permissions: gossh.Permissions{
				CriticalOptions: map[string]string{"source-address": "127.0.0.1/32"}, Extensions: ext}})},
		{"infinite validity", crafted(gossh.Certificate{CertType: gossh.UserCert, ValidPrincipals: []string{userID},
			ValidAfter: va, ValidBefore: gossh.CertTimeInfinity, Permissions: gossh.Permissions{Extensions: ext}})},
		{"plain key", func() gossh.AuthMethod { return gossh.PublicKeys(fresh()) }},
		{"CA key itself", func() gossh.AuthMethod { return gossh.PublicKeys(userCAKey) }},
		{"password", func() gossh.AuthMethod { return gossh.Password("hunter2") }},
		{"keyboard-interactive", func() gossh.AuthMethod {
			return gossh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) { return nil, nil })
		}},
		{"none", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var auth []gossh.AuthMethod
			if tt.auth != nil {
				auth = append(auth, tt.auth())
			}
			for _, sshUser := range []string{alloc, CommandUser} {
				c, err := gossh.Dial("tcp", e.addr, e.clientConfig(sshUser, auth...))
				if err == nil {
					c.Close()
					t.Fatalf("%s@gateway: got a connection; want the handshake refused", sshUser)
				}
				if !strings.Contains(err.Error(), "unable to authenticate") {
					t.Fatalf("%s@gateway: got %v; want an authentication failure", sshUser, err)
				}
			}
		})
	}
	if got := e.authorizedUsers(); len(got) != 0 {
		t.Fatalf("got gate.authorize calls for %q; want none", got)
	}

	// The control: a good certificate gets in, to the allocation too.
	e.dial(owner, CommandUser)
	if out, stderr, status, err := sshtest.Run(t, e.dial(owner, alloc), "echo in"); err != nil || status != 0 || out != "in\n" {
		t.Fatalf("the owner's own certificate: got %q, %q, %d, %v; want in", out, stderr, status, err)
	}
}

// TestKeyConfusion is CVE-2024-45337 against the gateway: a client that
// offers Bob's certificate (the gateway's PublicKeyHandler accepts it) and
// then authenticates with Alice's key is Alice, or nobody — never Bob.
// Whose identity the gateway acts on is what it sends gate.authorize.
func TestKeyConfusion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	alice, bob := e.newUser(), e.newUser() // each in a project of their own
	allocA, allocB := e.addAlloc(alice), e.addAlloc(bob)

	flows := []struct {
		name     string
		sshUser  string
		methods  []gossh.AuthMethod
		wantIn   bool   // the handshake succeeds
		wantEcho string // what `echo ok` prints ("" when the session is refused)
	}{
		{"offer B, authenticate A, open B's allocation", allocB,
			[]gossh.AuthMethod{gossh.PublicKeys(sshtest.OfferOnly(bob.auth)), gossh.PublicKeys(alice.auth)}, true, ""},
		{"offer B, authenticate A, open A's allocation", allocA,
			[]gossh.AuthMethod{gossh.PublicKeys(sshtest.OfferOnly(bob.auth)), gossh.PublicKeys(alice.auth)}, true, "ok\n"},
		{"offer A, offer B, authenticate A", allocB,
			[]gossh.AuthMethod{gossh.PublicKeys(sshtest.OfferOnly(alice.auth)), gossh.PublicKeys(sshtest.OfferOnly(bob.auth)), gossh.PublicKeys(alice.auth)}, true, ""},
		{"offer B, then password", allocB,
			[]gossh.AuthMethod{gossh.PublicKeys(sshtest.OfferOnly(bob.auth)), gossh.Password("x")}, false, ""},
		{"offer B, then keyboard-interactive", allocB,
			[]gossh.AuthMethod{gossh.PublicKeys(sshtest.OfferOnly(bob.auth)),
				gossh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) { return nil, nil })}, false, ""},
		{"offer B only", allocB, []gossh.AuthMethod{gossh.PublicKeys(sshtest.OfferOnly(bob.auth))}, false, ""},
		{"B's certificate on A's key", allocB,
			[]gossh.AuthMethod{gossh.PublicKeys(certSignerUnchecked{cert: bob.cert, Signer: alice.signer})}, false, ""},
	}
	for _, f := range flows {
		t.Run(f.name, func(t *testing.T) {
			cfg := e.clientConfig(f.sshUser)
			cfg.AuthCallback = sshtest.Steps(f.methods...)
			c, err := gossh.Dial("tcp", e.addr, cfg)
			if !f.wantIn {
				if err == nil {
					c.Close()
					t.Fatal("got a connection; want the handshake refused")
				}
				return
			}
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			stdout, stderr, status, err := sshtest.Run(t, c, "echo ok")
			if err != nil {
				t.Fatal(err)
			}
			if f.wantEcho == "" {
				// controld does not tell Alice that Bob's allocation exists.
				if status != exitGatewayError || stdout != "" || !strings.Contains(stderr, "allocation "+allocB+" not found") {
					t.Fatalf("got status %d, stdout %q, stderr %q; want %d and Alice refused Bob's allocation",
						status, stdout, stderr, exitGatewayError)
				}
			} else if stdout != f.wantEcho || status != 0 {
				t.Fatalf("got status %d, stdout %q, stderr %q; want 0 and %q", status, stdout, stderr, f.wantEcho)
			}
		})
	}
	got := e.authorizedUsers()
	if slices.Contains(got, bob.id) {
		t.Fatalf("gate.authorize was asked for Bob (%s) in %q; want only Alice (%s)", bob.id, got, alice.id)
	}
	if !slices.Contains(got, alice.id) {
		t.Fatalf("got gate.authorize calls for %q; want Alice's", got)
	}
}

// certSignerUnchecked presents cert but signs with another key: the
// signature does not verify against the certificate's key.
type certSignerUnchecked struct {
	gossh.Signer
	cert *gossh.Certificate
}

func (c certSignerUnchecked) PublicKey() gossh.PublicKey { return c.cert }
