package sshcert

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	mrand "math/rand/v2"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// fuzzCA mints the fuzz seeds deterministically (fixed key, seeded
// serials), so the certificates it signs are the same on every run and
// the inputs kept in testdata/fuzz stay meaningful.
func fuzzCA(f *testing.F, name string, seed byte) *Authority {
	a, err := New(name, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		f.Fatal(err)
	}
	a.rand = mrand.NewChaCha8([32]byte{seed})
	return a
}

func fuzzSubject(f *testing.F, seed byte) ssh.PublicKey {
	pub, err := ssh.NewPublicKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)).Public())
	if err != nil {
		f.Fatal(err)
	}
	return pub
}

// FuzzVerify feeds the certificate checks the key blob a peer presents
// in an SSH handshake (a ticket to hostd, a user certificate or a gateway
// certificate to sshgate, a host certificate to a client). Properties:
// each check returns its result or an error, never both; a certificate
// is only ever accepted in exactly the bytes the CA signed (no mutation
// of a ticket, its critical options included, gets through); an accepted
// ticket is for this node and its one principal is its POSIX user; the
// user check never accepts a certificate with critical options (a
// ticket).
func FuzzVerify(f *testing.F) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	internal, users := fuzzCA(f, "internal", 1), fuzzCA(f, "user", 2)
	signed := map[string]bool{}
	add := func(c *ssh.Certificate, err error) {
		if err != nil {
			f.Fatal(err)
		}
		b := c.Marshal()
		signed[string(b)] = true
		f.Add(b)
	}
	add(internal.SignTicket(fuzzSubject(f, 3), Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "u-1", KeyID: "u@gw s-1"}, now))
	add(internal.SignTicket(fuzzSubject(f, 4), Ticket{Node: "n-2", Allocation: "a-2", PosixUser: "u-2", TTL: MaxTicketTTL}, now))
	add(internal.SignGateway(fuzzSubject(f, 5), "gw-1", 0, now))
	add(users.SignUser(fuzzSubject(f, 6), UserCert{UserID: "u-1", KeyID: "a@example.com", SessionID: "s-1", MaxTTL: time.Hour}, now))
	add(users.SignHost(fuzzSubject(f, 7), []string{"gateway.example", "localhost"}, time.Hour, now))
	add(internal.SignTicket(fuzzSubject(f, 8), Ticket{Node: "n-1", Allocation: "a-3", PosixUser: "u-3"}, now.Add(-time.Hour))) // expired
	f.Add(fuzzSubject(f, 9).Marshal())
	internalKeys, userKeys := internal.Trusted(), users.Trusted()

	f.Fuzz(func(t *testing.T, blob []byte) {
		key, err := ssh.ParsePublicKey(blob)
		if err != nil {
			return
		}
		accepted := func(what string) {
			if !signed[string(blob)] {
				t.Fatalf("%s accepted a certificate the CA did not sign as it is: %x", what, blob)
			}
		}
		tk, err := VerifyTicket(internalKeys, key, "n-1", now)
		if err != nil {
			if tk != (Ticket{}) || !errors.Is(err, ErrRefused) {
				t.Fatalf("VerifyTicket: got %+v and %v", tk, err)
			}
		} else {
			accepted("VerifyTicket")
			cert := key.(*ssh.Certificate)
			if tk.Node != "n-1" || len(cert.ValidPrincipals) != 1 || cert.ValidPrincipals[0] != tk.PosixUser ||
				cert.CriticalOptions[OptionAllocation] != tk.Allocation || tk.ValidBefore.Sub(tk.ValidAfter) > MaxTicketTTL+TicketSkew {
				t.Fatalf("accepted ticket %+v of %+v", tk, cert)
			}
		}
		id, err := VerifyUser(userKeys, key, "", now)
		if err != nil {
			if id.UserID != "" || id.CA != "" || id.Extensions != nil || !errors.Is(err, ErrRefused) {
				t.Fatalf("VerifyUser: got %+v and %v", id, err)
			}
		} else {
			accepted("VerifyUser")
			if len(key.(*ssh.Certificate).CriticalOptions) != 0 {
				t.Fatalf("VerifyUser accepted critical options %v", key.(*ssh.Certificate).CriticalOptions)
			}
		}
		// A ticket is never a user certificate, even where the internal CA is trusted.
		if _, err := VerifyUser(internalKeys, key, "", now); err == nil {
			t.Fatalf("VerifyUser accepted a certificate of the internal CA: %x", blob)
		}
		gw, err := VerifyGateway(internalKeys, key, now)
		if err != nil {
			if gw.Name != "" || gw.CA != "" || !errors.Is(err, ErrRefused) {
				t.Fatalf("VerifyGateway: got %+v and %v", gw, err)
			}
		} else {
			accepted("VerifyGateway")
		}
		if err := VerifyHost(userKeys, "gateway.example", key, now); err == nil {
			accepted("VerifyHost")
		} else if !errors.Is(err, ErrRefused) {
			t.Fatalf("VerifyHost: %v does not wrap ErrRefused", err)
		}
	})
}
