package sshcert

import (
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestSignAndVerifyGateway(t *testing.T) {
	ca := newAuthority(t, "internal", newPrivateKey(t))
	key := newSigner(t).PublicKey()
	cert, err := ca.SignGateway(key, "sshgate-1", 0, now)
	if err != nil {
		t.Fatal(err)
	}
	id, err := VerifyGateway(ca.Trusted(), reparse(t, cert), now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "sshgate-1" || id.Serial != cert.Serial || !id.ValidBefore.Equal(now.Add(DefaultGatewayTTL)) ||
		id.CA != ssh.FingerprintSHA256(ca.Active()) {
		t.Errorf("got %+v; want gateway sshgate-1 until %s from %s", id, now.Add(DefaultGatewayTTL), ssh.FingerprintSHA256(ca.Active()))
	}
	for _, tt := range []struct {
		name string
		ttl  time.Duration
		gw   string
	}{
		{"too long", MaxGatewayTTL + time.Second, "gw"},
		{"negative", -time.Minute, "gw"},
		{"no name", time.Minute, ""},
		{"name with a comma", time.Minute, "a,b"},
	} {
		t.Run("sign "+tt.name, func(t *testing.T) {
			_, err := ca.SignGateway(key, tt.gw, tt.ttl, now)
			checkErr(t, err, ErrInvalidRequest)
		})
	}
}

// TestVerifyGatewayRefuses: only a gateway certificate of a trusted CA,
// valid now, is one; tickets, user and host certificates, plain keys and
// crafted look-alikes are not, and a gateway certificate is no ticket or
// user certificate either.
func TestVerifyGatewayRefuses(t *testing.T) {
	caKey := newPrivateKey(t)
	ca := newAuthority(t, "internal", caKey)
	caSigner, err := ssh.NewSignerFromKey(caKey)
	if err != nil {
		t.Fatal(err)
	}
	other := newAuthority(t, "internal", newPrivateKey(t))
	key := newSigner(t).PublicKey()
	mint := func(a *Authority, at time.Time) *ssh.Certificate {
		c, err := a.SignGateway(key, "gw", time.Hour, at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ticket, err := ca.SignTicket(key, Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "g1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	user, err := ca.SignUser(key, UserCert{UserID: PrincipalGateway, MaxTTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	after, before := window(-time.Minute, time.Hour)
	tests := []struct {
		name string
		key  ssh.PublicKey
		want error
	}{
		{"plain key", key, ErrNotCertificate},
		{"ticket", ticket, ErrCriticalOption},
		{"user certificate named like a gateway", user, ErrCriticalOption},
		{"other CA", mint(other, now), ErrUntrustedCA},
		{"expired", mint(ca, now.Add(-2*time.Hour)), ErrExpired},
		{"not yet valid", mint(ca, now.Add(2*time.Hour)), ErrNotYetValid},
		{"host certificate", craft(t, caSigner, ssh.Certificate{CertType: ssh.HostCert, ValidPrincipals: []string{PrincipalGateway},
			ValidAfter: after, ValidBefore: before, Permissions: ssh.Permissions{CriticalOptions: map[string]string{OptionGateway: "gw"}}}), ErrWrongCertType},
		{"other principal", craft(t, caSigner, ssh.Certificate{CertType: ssh.UserCert, ValidPrincipals: []string{"root"},
			ValidAfter: after, ValidBefore: before, Permissions: ssh.Permissions{CriticalOptions: map[string]string{OptionGateway: "gw"}}}), ErrPrincipal},
		{"extra principal", craft(t, caSigner, ssh.Certificate{CertType: ssh.UserCert, ValidPrincipals: []string{PrincipalGateway, "root"},
			ValidAfter: after, ValidBefore: before, Permissions: ssh.Permissions{CriticalOptions: map[string]string{OptionGateway: "gw"}}}), ErrPrincipal},
		{"empty name", craft(t, caSigner, ssh.Certificate{CertType: ssh.UserCert, ValidPrincipals: []string{PrincipalGateway},
			ValidAfter: after, ValidBefore: before, Permissions: ssh.Permissions{CriticalOptions: map[string]string{OptionGateway: ""}}}), ErrCriticalOption},
		{"extra option", craft(t, caSigner, ssh.Certificate{CertType: ssh.UserCert, ValidPrincipals: []string{PrincipalGateway},
			ValidAfter: after, ValidBefore: before, Permissions: ssh.Permissions{CriticalOptions: map[string]string{OptionGateway: "gw", "force-command": "sh"}}}), ErrCriticalOption},
		{"window too long", craft(t, caSigner, ssh.Certificate{CertType: ssh.UserCert, ValidPrincipals: []string{PrincipalGateway},
			ValidAfter: after, ValidBefore: uint64(now.Add(48 * time.Hour).Unix()), Permissions: ssh.Permissions{CriticalOptions: map[string]string{OptionGateway: "gw"}}}), ErrValidity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := VerifyGateway(ca.Trusted(), reparse(t, tt.key), now)
			checkErr(t, err, tt.want)
		})
	}
	gw := mint(ca, now)
	if _, err := VerifyTicket(ca.Trusted(), gw, "n-1", now); err == nil {
		t.Error("a gateway certificate verified as a ticket")
	}
	if _, err := VerifyUser(ca.Trusted(), gw, "", now); err == nil {
		t.Error("a gateway certificate verified as a user certificate")
	}
}
