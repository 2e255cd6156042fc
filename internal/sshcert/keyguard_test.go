package sshcert

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestFingerprintMatches(t *testing.T) {
	ca := newAuthority(t, "user", newPrivateKey(t))
	keyA, keyB := newSigner(t), newSigner(t)
	mint := func(k ssh.Signer, user string) *ssh.Certificate {
		c, err := ca.SignUser(k.PublicKey(), UserCert{UserID: user, MaxTTL: time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	certA, certA2, certB := mint(keyA, "alice"), mint(keyA, "alice"), mint(keyB, "bob")
	permsFor := func(c *ssh.Certificate) *ssh.Permissions {
		return VerifiedUser(c, Identity{UserID: c.ValidPrincipals[0]}).Permissions()
	}
	tests := []struct {
		name  string
		perms *ssh.Permissions
		key   ssh.PublicKey
		want  bool
	}{
		{"same certificate", permsFor(certA), certA, true},
		{"same certificate, through the wire", permsFor(certA), reparse(t, certA), true},
		{"other user's certificate", permsFor(certB), certA, false},
		{"the certificate's bare key", permsFor(certA), keyA.PublicKey(), false},
		{"another certificate of the same key", permsFor(certA), certA2, false},
		{"no key", permsFor(certA), nil, false},
		{"no permissions", nil, certA, false},
		{"no identity", &ssh.Permissions{}, certA, false},
		{"garbage identity", &ssh.Permissions{Extensions: map[string]string{PermVerified: "{"}}, certA, false},
		{"identity without fingerprint", &ssh.Permissions{Extensions: map[string]string{PermVerified: `{"user":{"user_id":"alice"}}`}}, certA, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FingerprintMatches(tt.perms, tt.key); got != tt.want {
				t.Fatalf("got %v; want %v", got, tt.want)
			}
		})
	}
}

func TestConfirmKey(t *testing.T) {
	ca := newAuthority(t, "user", newPrivateKey(t))
	mint := func(user string) *ssh.Certificate {
		c, err := ca.SignUser(newSigner(t).PublicKey(), UserCert{UserID: user, MaxTTL: time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	certA, certB := mint("alice"), mint("bob")
	alice := VerifiedUser(certA, Identity{UserID: "alice"})
	bob := VerifiedUser(certB, Identity{UserID: "bob"})

	tests := []struct {
		name        string
		build       func() *ssh.Permissions
		wantConfirm error // from ConfirmKey(perms, certA)
		wantUser    string
		wantErr     error // from VerifiedFrom
	}{
		{"stored, not confirmed", func() *ssh.Permissions { return alice.Permissions() }, nil, "", ErrUnverifiedKey},
		{"confirmed by its key", func() *ssh.Permissions {
			p := alice.Permissions()
			if err := ConfirmKey(p, certA); err != nil {
				t.Fatal(err)
			}
			return p
		}, nil, "alice", nil},
		{"other key's identity", func() *ssh.Permissions { return bob.Permissions() }, ErrUnverifiedKey, "", ErrUnverifiedKey},
		{"replaced after confirmation", func() *ssh.Permissions {
			p := alice.Permissions()
			if err := ConfirmKey(p, certA); err != nil {
				t.Fatal(err)
			}
			bob.Store(p) // a later attempt in a library sharing Permissions
			return p
		}, ErrUnverifiedKey, "", ErrUnverifiedKey},
		{"nothing stored", func() *ssh.Permissions { return &ssh.Permissions{} }, ErrUnverifiedKey, "", ErrUnverifiedKey},
		{"no permissions", func() *ssh.Permissions { return nil }, ErrUnverifiedKey, "", ErrUnverifiedKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// VerifiedFrom before any ConfirmKey in this run.
			v, err := VerifiedFrom(tt.build())
			if tt.wantUser != "" {
				checkErr(t, err, nil)
				if v.User == nil || v.User.UserID != tt.wantUser {
					t.Fatalf("got %+v; want user %s", v, tt.wantUser)
				}
			} else {
				checkErr(t, err, tt.wantErr)
			}
			checkErr(t, ConfirmKey(tt.build(), certA), tt.wantConfirm)
		})
	}
}

// TestGuardRefusesIdentityForAnotherKey: an accept func that returns the
// identity of a key other than the one offered is refused by the guard.
func TestGuardRefusesIdentityForAnotherKey(t *testing.T) {
	ca := newAuthority(t, "user", newPrivateKey(t))
	other, err := ca.SignUser(newSigner(t).PublicKey(), UserCert{UserID: "bob", MaxTTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	offered := newSigner(t).PublicKey()
	tests := []struct {
		name string
		v    Verified
	}{
		{"other key", VerifiedUser(other, Identity{UserID: "bob"})},
		{"no identity", Verified{Fingerprint: ssh.FingerprintSHA256(offered)}},
		{"user and ticket", Verified{Fingerprint: ssh.FingerprintSHA256(offered), User: &Identity{UserID: "bob"}, Ticket: &Ticket{Node: "n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &ssh.ServerConfig{}
			GuardServerConfig(cfg, func(ssh.ConnMetadata, ssh.PublicKey) (Verified, error) { return tt.v, nil })
			perms, err := cfg.PublicKeyCallback(nil, offered)
			if !errors.Is(err, ErrUnverifiedKey) || perms != nil {
				t.Fatalf("got %v, %v; want nil, %v", perms, err, ErrUnverifiedKey)
			}
		})
	}
}

// TestGuardChainsVerifiedCallback: a VerifiedPublicKeyCallback already in
// the config runs, and its refusal stands.
func TestGuardChainsVerifiedCallback(t *testing.T) {
	ca := newAuthority(t, "user", newPrivateKey(t))
	cert, err := ca.SignUser(newSigner(t).PublicKey(), UserCert{UserID: "alice", MaxTTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	refusal := errors.New("banned")
	tests := []struct {
		name     string
		previous func(ssh.ConnMetadata, ssh.PublicKey, *ssh.Permissions, string) (*ssh.Permissions, error)
		wantErr  error
	}{
		{"none", nil, nil},
		{"passes", func(_ ssh.ConnMetadata, _ ssh.PublicKey, p *ssh.Permissions, _ string) (*ssh.Permissions, error) {
			return p, nil
		}, nil},
		{"refuses", func(ssh.ConnMetadata, ssh.PublicKey, *ssh.Permissions, string) (*ssh.Permissions, error) {
			return nil, refusal
		}, refusal},
		{"drops the identity", func(ssh.ConnMetadata, ssh.PublicKey, *ssh.Permissions, string) (*ssh.Permissions, error) {
			return &ssh.Permissions{}, nil
		}, ErrUnverifiedKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &ssh.ServerConfig{VerifiedPublicKeyCallback: tt.previous}
			GuardServerConfig(cfg, func(_ ssh.ConnMetadata, key ssh.PublicKey) (Verified, error) {
				id, err := VerifyUser(ca.Trusted(), key, "", now)
				return VerifiedUser(key, id), err
			})
			perms, err := cfg.PublicKeyCallback(nil, cert)
			if err != nil {
				t.Fatal(err)
			}
			perms, err = cfg.VerifiedPublicKeyCallback(nil, cert, perms, ssh.KeyAlgoED25519)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			v, err := VerifiedFrom(perms)
			if err != nil || v.User.UserID != "alice" {
				t.Fatalf("got %+v, %v; want alice", v, err)
			}
		})
	}
}
