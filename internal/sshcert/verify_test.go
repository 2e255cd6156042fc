package sshcert

import (
	"bytes"
	"crypto/rand"
	"maps"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestVerifyUser(t *testing.T) {
	caKey := newPrivateKey(t)
	ca := newAuthority(t, "user", caKey)
	caSigner, err := ssh.NewSignerFromKey(caKey)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := newAuthority(t, "user", newPrivateKey(t))
	internalCA := newAuthority(t, "internal", newPrivateKey(t))
	user := newSigner(t)
	trusted := ca.Trusted()

	good, err := ca.SignUser(user.PublicKey(), UserCert{UserID: "u-1", KeyID: "a@example.com", MaxTTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	fromOtherCA, err := otherCA.SignUser(user.PublicKey(), UserCert{UserID: "u-1", MaxTTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	host, err := ca.SignHost(user.PublicKey(), []string{"u-1"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	ticketOfUserCA, err := ca.SignTicket(user.PublicKey(), Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "u-1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := internalCA.SignTicket(user.PublicKey(), Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "u-1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	// Self-signed: the certificate's own key signs it.
	selfSigned := craft(t, user, ssh.Certificate{Key: user.PublicKey(), CertType: ssh.UserCert,
		ValidPrincipals: []string{"u-1"}, ValidAfter: uint64(now.Add(-time.Minute).Unix()), ValidBefore: uint64(now.Add(time.Hour).Unix())})
	// Tampered: the principal changed after the CA signed.
	tampered := *good
	tampered.ValidPrincipals = []string{"u-2"}
	tamperedWindow := *good
	tamperedWindow.ValidBefore += 3600
	// A certificate whose signature key is itself a certificate (built in
	// memory: the wire parser refuses it, see TestSignatureKeyIsCertificate).
	byCert := *good
	byCert.SignatureKey = good

	mk := func(c ssh.Certificate) *ssh.Certificate {
		if c.CertType == 0 {
			c.CertType = ssh.UserCert
		}
		if c.ValidBefore == 0 {
			c.ValidAfter, c.ValidBefore = window(-time.Minute, time.Hour)
		}
		if c.ValidPrincipals == nil {
			c.ValidPrincipals = []string{"u-1"}
		}
		c.Key = user.PublicKey()
		return craft(t, caSigner, c)
	}

	tests := []struct {
		name    string
		trusted []ssh.PublicKey
		key     ssh.PublicKey
		want    string // principal asked for
		wantErr error
	}{
		{"valid", trusted, good, "", nil},
		{"valid, principal asked for", trusted, good, "u-1", nil},
		{"valid, through the wire", trusted, reparse(t, good), "", nil},
		{"valid, with another key trusted too", append(otherCA.Trusted(), trusted...), good, "", nil},
		{"plain key", trusted, user.PublicKey(), "", ErrNotCertificate},
		{"no key", trusted, nil, "", ErrNotCertificate},
		{"empty certificate", trusted, &ssh.Certificate{}, "", ErrNotCertificate},
		{"host certificate", trusted, host, "", ErrWrongCertType},
		{"unknown certificate type", trusted, mk(ssh.Certificate{CertType: 3}), "", ErrWrongCertType},
		{"other CA", trusted, fromOtherCA, "", ErrUntrustedCA},
		{"no trusted keys", nil, good, "", ErrUntrustedCA},
		{"self-signed", trusted, selfSigned, "", ErrUntrustedCA},
		{"self-signed, its key trusted as a plain key", []ssh.PublicKey{user.PublicKey()}, selfSigned, "", nil},
		{"tampered principal", trusted, &tampered, "u-2", ErrUntrustedCA},
		{"tampered principal, through the wire", trusted, reparse(t, &tampered), "u-2", ErrUntrustedCA},
		{"tampered window", trusted, &tamperedWindow, "", ErrUntrustedCA},
		{"signed by a certificate", append(trusted, good), &byCert, "", ErrUntrustedCA},
		{"expired", trusted, mk(ssh.Certificate{ValidAfter: uint64(now.Add(-2 * time.Hour).Unix()), ValidBefore: uint64(now.Add(-time.Second).Unix())}), "", ErrExpired},
		{"expires this second", trusted, mk(ssh.Certificate{ValidAfter: uint64(now.Add(-2 * time.Hour).Unix()), ValidBefore: uint64(now.Unix())}), "", ErrExpired},
		{"one second left", trusted, mk(ssh.Certificate{ValidAfter: uint64(now.Add(-2 * time.Hour).Unix()), ValidBefore: uint64(now.Add(time.Second).Unix())}), "", nil},
		{"not yet valid", trusted, mk(ssh.Certificate{ValidAfter: uint64(now.Add(time.Second).Unix()), ValidBefore: uint64(now.Add(time.Hour).Unix())}), "", ErrNotYetValid},
		{"valid from this second", trusted, mk(ssh.Certificate{ValidAfter: uint64(now.Unix()), ValidBefore: uint64(now.Add(time.Hour).Unix())}), "", nil},
		{"never expires", trusted, mk(ssh.Certificate{ValidAfter: 0, ValidBefore: ssh.CertTimeInfinity}), "", ErrValidity},
		{"empty window", trusted, mk(ssh.Certificate{ValidAfter: uint64(now.Add(time.Hour).Unix()), ValidBefore: uint64(now.Add(time.Hour).Unix())}), "", ErrValidity},
		{"other principal", trusted, good, "u-2", ErrPrincipal},
		{"no principals", trusted, mk(ssh.Certificate{ValidPrincipals: []string{}}), "", ErrPrincipal},
		{"no principals, principal asked for", trusted, mk(ssh.Certificate{ValidPrincipals: []string{}}), "u-1", ErrPrincipal},
		{"empty principal", trusted, mk(ssh.Certificate{ValidPrincipals: []string{""}}), "", ErrPrincipal},
		{"two principals", trusted, mk(ssh.Certificate{ValidPrincipals: []string{"u-1", "u-2"}}), "", ErrPrincipal},
		{"two principals, one asked for", trusted, mk(ssh.Certificate{ValidPrincipals: []string{"u-1", "u-2"}}), "u-2", nil},
		{"source-address", trusted, mk(ssh.Certificate{Permissions: ssh.Permissions{CriticalOptions: map[string]string{"source-address": "127.0.0.1/32"}}}), "", ErrCriticalOption},
		{"force-command", trusted, mk(ssh.Certificate{Permissions: ssh.Permissions{CriticalOptions: map[string]string{"force-command": "/bin/true"}}}), "", ErrCriticalOption},
		{"unknown critical option", trusted, mk(ssh.Certificate{Permissions: ssh.Permissions{CriticalOptions: map[string]string{"x-gpuaas-admin": "yes"}}}), "", ErrCriticalOption},
		{"ticket from the user CA", trusted, ticketOfUserCA, "", ErrCriticalOption},
		{"ticket from the internal CA", trusted, ticket, "", ErrUntrustedCA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := VerifyUser(tt.trusted, tt.key, tt.want, now)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				if id.UserID != "" {
					t.Fatalf("got identity %+v with an error; want none", id)
				}
				return
			}
			cert := tt.key.(*ssh.Certificate)
			wantUser := tt.want
			if wantUser == "" {
				wantUser = cert.ValidPrincipals[0]
			}
			if id.UserID != wantUser || id.KeyID != cert.KeyId || id.Serial != cert.Serial {
				t.Fatalf("got identity %+v; want user %s, key id %q, serial %d", id, wantUser, cert.KeyId, cert.Serial)
			}
			if id.ValidAfter.Unix() != int64(cert.ValidAfter) || id.ValidBefore.Unix() != int64(cert.ValidBefore) {
				t.Fatalf("got window %s–%s; want %d–%d", id.ValidAfter, id.ValidBefore, cert.ValidAfter, cert.ValidBefore)
			}
			if !maps.Equal(id.Extensions, cert.Extensions) {
				t.Fatalf("got extensions %v; want %v", id.Extensions, cert.Extensions)
			}
			if want := ssh.FingerprintSHA256(cert.SignatureKey); id.CA != want {
				t.Fatalf("got CA %s; want %s", id.CA, want)
			}
		})
	}
}

// TestSignatureKeyIsCertificate: the wire parser refuses a certificate signed
// by a certificate, and so does VerifyUser for one built in memory (above),
// even with a signature the signing certificate's key really made.
func TestSignatureKeyIsCertificate(t *testing.T) {
	caKey := newPrivateKey(t)
	ca := newAuthority(t, "user", caKey)
	caSigner, err := ssh.NewSignerFromKey(caKey)
	if err != nil {
		t.Fatal(err)
	}
	// An intermediate: the CA key certified as a user... then used to sign.
	intermediate, err := ca.SignUser(ca.Active(), UserCert{UserID: "ca", MaxTTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &ssh.Certificate{Key: newSigner(t).PublicKey(), Serial: 1, CertType: ssh.UserCert,
		ValidPrincipals: []string{"u-1"}, Nonce: []byte("nonce")}
	leaf.ValidAfter, leaf.ValidBefore = window(-time.Minute, time.Hour)
	leaf.SignatureKey = intermediate
	sig, err := caSigner.Sign(rand.Reader, bytesForSigning(leaf))
	if err != nil {
		t.Fatal(err)
	}
	leaf.Signature = sig

	if _, err := ssh.ParsePublicKey(leaf.Marshal()); err == nil {
		t.Fatal("got a certificate signed by a certificate parsed; want a parse error")
	}
	_, err = VerifyUser(append(ca.Trusted(), intermediate), leaf, "", now)
	checkErr(t, err, ErrUntrustedCA)
}

func TestVerifyTicket(t *testing.T) {
	internalKey := newPrivateKey(t)
	internalCA := newAuthority(t, "internal", internalKey)
	internalSigner, err := ssh.NewSignerFromKey(internalKey)
	if err != nil {
		t.Fatal(err)
	}
	userCA := newAuthority(t, "user", newPrivateKey(t))
	key := newSigner(t)
	trusted := internalCA.Trusted()
	want := Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "gpu_a1", KeyID: "u-1 via gw-3"}

	mint := func(ca *Authority, tk Ticket, at time.Time) *ssh.Certificate {
		cert, err := ca.SignTicket(key.PublicKey(), tk, at)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	options := func(drop string, extra map[string]string) ssh.Permissions {
		opts := map[string]string{OptionNode: "n-1", OptionAllocation: "a-1", OptionPosixUser: "gpu_a1"}
		delete(opts, drop)
		maps.Copy(opts, extra)
		return ssh.Permissions{CriticalOptions: opts}
	}
	mk := func(c ssh.Certificate) *ssh.Certificate {
		c.Key, c.CertType = key.PublicKey(), ssh.UserCert
		if c.ValidBefore == 0 {
			c.ValidAfter, c.ValidBefore = window(-TicketSkew, time.Minute)
		}
		if c.ValidPrincipals == nil {
			c.ValidPrincipals = []string{"gpu_a1"}
		}
		return craft(t, internalSigner, c)
	}
	userCert, err := internalCA.SignUser(key.PublicKey(), UserCert{UserID: "gpu_a1", MaxTTL: time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	hostCert, err := internalCA.SignHost(key.PublicKey(), []string{"n-1"}, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		trusted []ssh.PublicKey
		key     ssh.PublicKey
		node    string
		wantErr error
	}{
		{"valid", trusted, mint(internalCA, want, now), "n-1", nil},
		{"valid, through the wire", trusted, reparse(t, mint(internalCA, want, now)), "n-1", nil},
		{"minted 50s ago", trusted, mint(internalCA, want, now.Add(-50*time.Second)), "n-1", nil},
		{"expired", trusted, mint(internalCA, want, now.Add(-time.Minute)), "n-1", ErrExpired},
		{"minted in the future beyond skew", trusted, mint(internalCA, want, now.Add(31*time.Second)), "n-1", ErrNotYetValid},
		{"another node", trusted, mint(internalCA, want, now), "n-2", ErrWrongNode},
		{"node not given", trusted, mint(internalCA, want, now), "", ErrWrongNode},
		{"from the user CA", trusted, mint(userCA, want, now), "n-1", ErrUntrustedCA},
		{"plain key", trusted, key.PublicKey(), "n-1", ErrNotCertificate},
		{"host certificate", trusted, hostCert, "n-1", ErrWrongCertType},
		{"user certificate without options", trusted, userCert, "n-1", ErrCriticalOption},
		{"no node option", trusted, mk(ssh.Certificate{Permissions: options(OptionNode, nil)}), "n-1", ErrCriticalOption},
		{"no allocation option", trusted, mk(ssh.Certificate{Permissions: options(OptionAllocation, nil)}), "n-1", ErrCriticalOption},
		{"no POSIX user option", trusted, mk(ssh.Certificate{Permissions: options(OptionPosixUser, nil)}), "n-1", ErrCriticalOption},
		{"empty allocation", trusted, mk(ssh.Certificate{Permissions: options("", map[string]string{OptionAllocation: ""})}), "n-1", ErrCriticalOption},
		{"unknown option", trusted, mk(ssh.Certificate{Permissions: options("", map[string]string{"force-command": "sh"})}), "n-1", ErrCriticalOption},
		{"principal is not the POSIX user", trusted, mk(ssh.Certificate{Permissions: options("", nil), ValidPrincipals: []string{"root"}}), "n-1", ErrPrincipal},
		{"two principals", trusted, mk(ssh.Certificate{Permissions: options("", nil), ValidPrincipals: []string{"gpu_a1", "root"}}), "n-1", ErrPrincipal},
		{"window too long", trusted, mk(ssh.Certificate{Permissions: options("", nil), ValidAfter: uint64(now.Add(-time.Minute).Unix()), ValidBefore: uint64(now.Add(time.Hour).Unix())}), "n-1", ErrValidity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := VerifyTicket(tt.trusted, tt.key, tt.node, now)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			cert := tt.key.(*ssh.Certificate)
			if got.Node != want.Node || got.Allocation != want.Allocation || got.PosixUser != want.PosixUser || got.KeyID != want.KeyID {
				t.Fatalf("got ticket %+v; want %+v", got, want)
			}
			if got.Serial != cert.Serial || got.ValidBefore.Unix() != int64(cert.ValidBefore) || got.ValidAfter.Unix() != int64(cert.ValidAfter) {
				t.Fatalf("got serial %d window %s–%s; want %d %d–%d", got.Serial, got.ValidAfter, got.ValidBefore, cert.Serial, cert.ValidAfter, cert.ValidBefore)
			}
		})
	}
}

func TestVerifyHost(t *testing.T) {
	hostKey := newPrivateKey(t)
	hostCA := newAuthority(t, "host", hostKey)
	hostSigner, err := ssh.NewSignerFromKey(hostKey)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := newAuthority(t, "host", newPrivateKey(t))
	userCA := newAuthority(t, "user", newPrivateKey(t))
	key := newSigner(t).PublicKey()
	sign := func(ca *Authority, names ...string) *ssh.Certificate {
		c, err := ca.SignHost(key, names, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	userCert, err := hostCA.SignUser(key, UserCert{UserID: "gw.example", MaxTTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	withOption := craft(t, hostSigner, ssh.Certificate{Key: key, CertType: ssh.HostCert, ValidPrincipals: []string{"gw.example"},
		ValidAfter: uint64(now.Add(-time.Minute).Unix()), ValidBefore: uint64(now.Add(time.Hour).Unix()),
		Permissions: ssh.Permissions{CriticalOptions: map[string]string{"x": "y"}}})
	noNames := craft(t, hostSigner, ssh.Certificate{Key: key, CertType: ssh.HostCert,
		ValidAfter: uint64(now.Add(-time.Minute).Unix()), ValidBefore: uint64(now.Add(time.Hour).Unix())})

	tests := []struct {
		name     string
		trusted  []ssh.PublicKey
		hostname string
		key      ssh.PublicKey
		at       time.Time
		wantErr  error
	}{
		{"valid", hostCA.Trusted(), "gw.example", sign(hostCA, "gw.example", "localhost"), now, nil},
		{"valid, second name", hostCA.Trusted(), "localhost", sign(hostCA, "gw.example", "localhost"), now, nil},
		{"other name", hostCA.Trusted(), "evil.example", sign(hostCA, "gw.example"), now, ErrPrincipal},
		{"no wildcard matching", hostCA.Trusted(), "a.gw.example", sign(hostCA, "*.gw.example"), now, ErrPrincipal},
		{"no names in certificate", hostCA.Trusted(), "gw.example", noNames, now, ErrPrincipal},
		{"empty hostname", hostCA.Trusted(), "", sign(hostCA, "gw.example"), now, ErrPrincipal},
		{"other CA", hostCA.Trusted(), "gw.example", sign(otherCA, "gw.example"), now, ErrUntrustedCA},
		{"user CA", hostCA.Trusted(), "gw.example", sign(userCA, "gw.example"), now, ErrUntrustedCA},
		{"user certificate", hostCA.Trusted(), "gw.example", userCert, now, ErrWrongCertType},
		{"plain key", hostCA.Trusted(), "gw.example", key, now, ErrNotCertificate},
		{"critical option", hostCA.Trusted(), "gw.example", withOption, now, ErrCriticalOption},
		{"expired", hostCA.Trusted(), "gw.example", sign(hostCA, "gw.example"), now.Add(time.Hour), ErrExpired},
		{"not yet valid", hostCA.Trusted(), "gw.example", sign(hostCA, "gw.example"), now.Add(-2 * time.Minute), ErrNotYetValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, VerifyHost(tt.trusted, tt.hostname, tt.key, tt.at), tt.wantErr)
		})
	}
}

func TestBytesForSigningMatchesLibrary(t *testing.T) {
	// Our copy of x/crypto's unexported bytesForSigning must cover exactly
	// what SignCert signed, or every certificate would be refused.
	ca := newSigner(t)
	cert := craft(t, ca, ssh.Certificate{CertType: ssh.UserCert, ValidPrincipals: []string{"u"}, ValidBefore: 10})
	if err := ca.PublicKey().Verify(bytesForSigning(cert), cert.Signature); err != nil {
		t.Fatalf("got %v; want the CA's signature to verify over bytesForSigning", err)
	}
	if !bytes.HasPrefix(cert.Marshal(), bytesForSigning(cert)) {
		t.Fatal("got signed bytes that are not a prefix of the wire form; want a prefix")
	}
}
