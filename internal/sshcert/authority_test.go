package sshcert

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestNew(t *testing.T) {
	key := newPrivateKey(t)
	other := publicOf(t, newPrivateKey(t))
	cert := craft(t, newSigner(t), ssh.Certificate{CertType: ssh.UserCert, ValidPrincipals: []string{"u"}})
	tests := []struct {
		name        string
		caName      string
		active      ed25519.PrivateKey
		alsoTrusted []ssh.PublicKey
		wantTrusted int
		wantErr     error
	}{
		{"active only", "user", key, nil, 1, nil},
		{"rotation overlap", "user", key, []ssh.PublicKey{other}, 2, nil},
		{"duplicates dropped", "user", key, []ssh.PublicKey{other, publicOf(t, key), other}, 2, nil},
		{"no name", "", key, nil, 0, ErrInvalidRequest},
		{"name with space", "user ca", key, nil, 0, ErrInvalidRequest},
		{"short key", "user", key[:10], nil, 0, ErrInvalidRequest},
		{"nil trusted key", "user", key, []ssh.PublicKey{nil}, 0, ErrInvalidRequest},
		{"certificate as trusted key", "user", key, []ssh.PublicKey{cert}, 0, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.caName, tt.active, tt.alsoTrusted...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := len(a.Trusted()); got != tt.wantTrusted {
				t.Fatalf("got %d trusted keys; want %d", got, tt.wantTrusted)
			}
			if got, want := a.Trusted()[0].Marshal(), publicOf(t, tt.active).Marshal(); !bytes.Equal(got, want) {
				t.Fatalf("got first trusted key %x; want the active key %x", got, want)
			}
			if got, want := a.Active().Marshal(), publicOf(t, tt.active).Marshal(); !bytes.Equal(got, want) {
				t.Fatalf("got active key %x; want %x", got, want)
			}
		})
	}
}

func TestTrustedIsACopy(t *testing.T) {
	a := newAuthority(t, "user", newPrivateKey(t))
	a.Trusted()[0] = nil
	if a.Trusted()[0] == nil {
		t.Fatal("got a trusted list changed through Trusted(); want a copy")
	}
}

// TestRotation walks a CA rotation: trust the new key, sign with it, retire
// the old one.
func TestRotation(t *testing.T) {
	oldKey, newKey := newPrivateKey(t), newPrivateKey(t)
	user := newSigner(t)
	req := UserCert{UserID: "u-1", KeyID: "u1@example.com", MaxTTL: time.Hour}
	mint := func(a *Authority) ssh.PublicKey {
		cert, err := a.SignUser(user.PublicKey(), req, now)
		if err != nil {
			t.Fatal(err)
		}
		return reparse(t, cert)
	}
	oldCert := mint(newAuthority(t, "user", oldKey))
	newCert := mint(newAuthority(t, "user", newKey))

	tests := []struct {
		name    string
		phase   *Authority
		cert    ssh.PublicKey
		wantErr error
		wantCA  ed25519.PrivateKey
	}{
		{"before rotation: old cert", newAuthority(t, "user", oldKey), oldCert, nil, oldKey},
		{"before rotation: new cert", newAuthority(t, "user", oldKey), newCert, ErrUntrustedCA, nil},
		{"new key distributed: old cert", newAuthority(t, "user", oldKey, publicOf(t, newKey)), oldCert, nil, oldKey},
		{"new key distributed: new cert", newAuthority(t, "user", oldKey, publicOf(t, newKey)), newCert, nil, newKey},
		{"new key active: old cert", newAuthority(t, "user", newKey, publicOf(t, oldKey)), oldCert, nil, oldKey},
		{"new key active: new cert", newAuthority(t, "user", newKey, publicOf(t, oldKey)), newCert, nil, newKey},
		{"old key retired: old cert", newAuthority(t, "user", newKey), oldCert, ErrUntrustedCA, nil},
		{"old key retired: new cert", newAuthority(t, "user", newKey), newCert, nil, newKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := VerifyUser(tt.phase.Trusted(), tt.cert, "", now)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			if want := ssh.FingerprintSHA256(publicOf(t, tt.wantCA)); id.CA != want {
				t.Fatalf("got CA %s; want %s", id.CA, want)
			}
		})
	}

	// The key that signs after the switch is the new one.
	if got, want := mint(newAuthority(t, "user", newKey, publicOf(t, oldKey))).(*ssh.Certificate).SignatureKey.Marshal(),
		publicOf(t, newKey).Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("got certificate signed by %x; want the new key %x", got, want)
	}
}

func TestAuthorizedKeysLines(t *testing.T) {
	oldKey, newKey := newPrivateKey(t), newPrivateKey(t)
	a := newAuthority(t, "user", newKey, publicOf(t, oldKey))
	lines := a.AuthorizedKeysLines()
	if got, want := len(lines), 2; got != want {
		t.Fatalf("got %d lines; want %d", got, want)
	}
	for i, line := range lines {
		key, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if got, want := options, []string{"cert-authority"}; len(got) != 1 || got[0] != want[0] {
			t.Fatalf("got options %q; want %q", got, want)
		}
		if !bytes.Equal(key.Marshal(), a.Trusted()[i].Marshal()) {
			t.Fatalf("got key %s; want trusted key %d", ssh.FingerprintSHA256(key), i)
		}
		if got, want := comment, "gpuaas-user-ca"; got != want {
			t.Fatalf("got comment %q; want %q", got, want)
		}
		if len(rest) != 0 {
			t.Fatalf("got trailing %q; want one line", rest)
		}
	}
}

func TestKnownHostsLines(t *testing.T) {
	oldKey, newKey := newPrivateKey(t), newPrivateKey(t)
	hostCA := newAuthority(t, "host", newKey, publicOf(t, oldKey))
	const pattern = "[gw.example]:2222"
	lines, err := hostCA.KnownHostsLines(pattern)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(lines), 2; got != want {
		t.Fatalf("got %d lines; want %d", got, want)
	}
	for i, line := range lines {
		marker, hosts, key, comment, rest, err := ssh.ParseKnownHosts([]byte(line))
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if got, want := marker, "cert-authority"; got != want {
			t.Fatalf("got marker %q; want %q", got, want)
		}
		if len(hosts) != 1 || hosts[0] != pattern {
			t.Fatalf("got hosts %q; want [%s]", hosts, pattern)
		}
		if !bytes.Equal(key.Marshal(), hostCA.Trusted()[i].Marshal()) {
			t.Fatalf("got key %s; want trusted key %d", ssh.FingerprintSHA256(key), i)
		}
		if got, want := comment, "gpuaas-host-ca"; got != want {
			t.Fatalf("got comment %q; want %q", got, want)
		}
		if len(rest) != 0 {
			t.Fatalf("got trailing %q; want one line", rest)
		}
	}

	// The lines work as a known_hosts file: host certificates from either
	// key are accepted for the pattern's host, not for another.
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check, err := knownhosts.New(path)
	if err != nil {
		t.Fatal(err)
	}
	remote := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 2222}
	for _, key := range []ed25519.PrivateKey{oldKey, newKey} {
		hostCert, err := newAuthority(t, "host", key).SignHost(newSigner(t).PublicKey(), []string{"gw.example"}, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := check("gw.example:2222", remote, hostCert); err != nil {
			t.Fatalf("got %v for a host certificate from a trusted key; want accepted", err)
		}
		if err := check("other.example:2222", remote, hostCert); err == nil {
			t.Fatal("got a host certificate accepted for another host; want refused")
		}
	}

	for _, bad := range []string{"", "a b", "@revoked", "host#x", "a\nb"} {
		if _, err := hostCA.KnownHostsLines(bad); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("pattern %q: got %v; want %v", bad, err, ErrInvalidRequest)
		}
	}
}

func TestParseTrusted(t *testing.T) {
	a := newAuthority(t, "user", newPrivateKey(t), publicOf(t, newPrivateKey(t)))
	plain := publicOf(t, newPrivateKey(t))
	cert, err := a.SignUser(newSigner(t).PublicKey(), UserCert{UserID: "u", MaxTTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		text    string
		want    []ssh.PublicKey
		wantErr error
	}{
		{"authorized keys lines", strings.Join(a.AuthorizedKeysLines(), "\n"), a.Trusted(), nil},
		{"plain keys, comments, blanks, duplicates",
			"# user CA\n\n" + string(ssh.MarshalAuthorizedKey(plain)) + "\n" + string(ssh.MarshalAuthorizedKey(plain)),
			[]ssh.PublicKey{plain}, nil},
		{"empty", "\n# nothing\n", nil, ErrInvalidRequest},
		{"certificate", string(ssh.MarshalAuthorizedKey(cert)), nil, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTrusted([]byte(tt.text))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d keys; want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !bytes.Equal(got[i].Marshal(), tt.want[i].Marshal()) {
					t.Fatalf("got key %d %s; want %s", i, ssh.FingerprintSHA256(got[i]), ssh.FingerprintSHA256(tt.want[i]))
				}
			}
		})
	}
	if _, err := ParseTrusted([]byte("not a key")); err == nil {
		t.Fatal("got no error for garbage; want one")
	}
}

func TestPrivateKeyRoundTrip(t *testing.T) {
	key := newPrivateKey(t)
	tests := []struct {
		name          string
		passphrase    []byte
		parseWith     []byte
		wantEncrypted bool
		wantErr       bool
	}{
		{"plain", nil, nil, false, false},
		{"encrypted", []byte("s3cret"), []byte("s3cret"), true, false},
		{"missing passphrase", []byte("s3cret"), nil, true, true},
	}
	// Encrypting runs bcrypt_pbkdf, slow under -race: once per passphrase.
	marshalled := map[string][]byte{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pemBytes, ok := marshalled[string(tt.passphrase)]
			if !ok {
				var err error
				if pemBytes, err = MarshalPrivateKey(key, "gpuaas-user-ca", tt.passphrase); err != nil {
					t.Fatal(err)
				}
				marshalled[string(tt.passphrase)] = pemBytes
			}
			block, _ := pem.Decode(pemBytes)
			if block == nil || block.Type != "OPENSSH PRIVATE KEY" {
				t.Fatalf("got PEM block %v; want OPENSSH PRIVATE KEY", block)
			}
			if got := !bytes.Contains(pemBytes, []byte("AAAABG5vbmU")); got != tt.wantEncrypted { // base64 of the "none" cipher name
				t.Fatalf("got encrypted %v; want %v", got, tt.wantEncrypted)
			}
			got, err := ParsePrivateKey(pemBytes, tt.parseWith)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v; want error %v", err, tt.wantErr)
			}
			if err == nil && !key.Equal(got) {
				t.Fatal("got a different key back; want the same")
			}
		})
	}

	if _, err := MarshalPrivateKey(key[:5], "", nil); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("got %v for a short key; want %v", err, ErrInvalidRequest)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(rsaKey, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePrivateKey(pem.EncodeToMemory(block), nil); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("got %v for an RSA key; want %v", err, ErrInvalidRequest)
	}
}
