package sshcert

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"maps"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestSignUser(t *testing.T) {
	ca := newAuthority(t, "user", newPrivateKey(t))
	pub := newSigner(t).PublicKey()
	sessionEnd := now.Add(8*time.Hour + 700*time.Millisecond) // not on a second
	tests := []struct {
		name       string
		req        UserCert
		wantBefore time.Time // zero: an error is wanted
		wantErr    error
	}{
		{"session end only", UserCert{UserID: "u-1", KeyID: "a@example.com", ValidBefore: sessionEnd}, now.Add(8 * time.Hour), nil},
		{"TTL shorter than session", UserCert{UserID: "u-1", ValidBefore: sessionEnd, MaxTTL: time.Hour}, now.Add(time.Hour), nil},
		{"session shorter than TTL", UserCert{UserID: "u-1", ValidBefore: now.Add(30 * time.Minute), MaxTTL: time.Hour}, now.Add(30 * time.Minute), nil},
		{"TTL only", UserCert{UserID: "u-1", MaxTTL: 90 * time.Second}, now.Add(90 * time.Second), nil},
		{"fractional TTL rounds down", UserCert{UserID: "u-1", MaxTTL: 1500 * time.Millisecond}, now.Add(time.Second), nil},
		{"no end of validity", UserCert{UserID: "u-1"}, time.Time{}, ErrInvalidRequest},
		{"session already over", UserCert{UserID: "u-1", ValidBefore: now}, time.Time{}, ErrInvalidRequest},
		{"session over within the second", UserCert{UserID: "u-1", ValidBefore: now.Add(900 * time.Millisecond)}, time.Time{}, ErrInvalidRequest},
		{"negative TTL", UserCert{UserID: "u-1", MaxTTL: -time.Hour}, time.Time{}, ErrInvalidRequest},
		{"no user id", UserCert{KeyID: "a@example.com", MaxTTL: time.Hour}, time.Time{}, ErrInvalidRequest},
		{"user id with comma", UserCert{UserID: "u-1,u-2", MaxTTL: time.Hour}, time.Time{}, ErrInvalidRequest},
		{"user id with space", UserCert{UserID: "u 1", MaxTTL: time.Hour}, time.Time{}, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := ca.SignUser(pub, tt.req, now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got, want := int64(cert.ValidBefore), tt.wantBefore.Unix(); got != want {
				t.Fatalf("got ValidBefore %d; want %d", got, want)
			}
			// Never later than asked for, whichever bound applies.
			if !tt.req.ValidBefore.IsZero() && int64(cert.ValidBefore) > tt.req.ValidBefore.Unix() {
				t.Fatalf("got ValidBefore %d; want at most the session end %d", cert.ValidBefore, tt.req.ValidBefore.Unix())
			}
			if tt.req.MaxTTL > 0 && int64(cert.ValidBefore) > now.Add(tt.req.MaxTTL).Unix() {
				t.Fatalf("got ValidBefore %d; want at most now+TTL %d", cert.ValidBefore, now.Add(tt.req.MaxTTL).Unix())
			}
			if got, want := int64(cert.ValidAfter), now.Add(-time.Minute).Unix(); got != want {
				t.Fatalf("got ValidAfter %d; want now-1m %d", got, want)
			}
			if got, want := cert.CertType, uint32(ssh.UserCert); got != want {
				t.Fatalf("got type %d; want %d", got, want)
			}
			if len(cert.ValidPrincipals) != 1 || cert.ValidPrincipals[0] != tt.req.UserID {
				t.Fatalf("got principals %q; want [%s]", cert.ValidPrincipals, tt.req.UserID)
			}
			if got, want := cert.KeyId, tt.req.KeyID; got != want {
				t.Fatalf("got key id %q; want %q", got, want)
			}
			wantExt := map[string]string{"permit-pty": "", "permit-port-forwarding": "", "permit-agent-forwarding": ""}
			if !maps.Equal(cert.Extensions, wantExt) {
				t.Fatalf("got extensions %v; want %v", cert.Extensions, wantExt)
			}
			if len(cert.CriticalOptions) != 0 {
				t.Fatalf("got critical options %v; want none", cert.CriticalOptions)
			}
			if cert.Serial == 0 {
				t.Fatal("got serial 0; want a random one")
			}
			if _, err := VerifyUser(ca.Trusted(), reparse(t, cert), tt.req.UserID, now); err != nil {
				t.Fatalf("got %v verifying the minted certificate; want accepted", err)
			}
		})
	}
}

func TestSerialsDiffer(t *testing.T) {
	ca := newAuthority(t, "user", newPrivateKey(t))
	pub := newSigner(t).PublicKey()
	seen := map[uint64]bool{}
	for range 50 {
		cert, err := ca.SignUser(pub, UserCert{UserID: "u-1", MaxTTL: time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		if seen[cert.Serial] {
			t.Fatalf("got serial %d twice; want distinct serials", cert.Serial)
		}
		seen[cert.Serial] = true
	}
}

func TestSignRefusesSubjectKeys(t *testing.T) {
	ca := newAuthority(t, "user", newPrivateKey(t))
	cert, err := ca.SignUser(newSigner(t).PublicKey(), UserCert{UserID: "u-1", MaxTTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallPub, err := ssh.NewPublicKey(&small.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	big, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	bigPub, err := ssh.NewPublicKey(&big.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		pub     ssh.PublicKey
		wantErr error
	}{
		{"nil", nil, ErrInvalidRequest},
		{"certificate", cert, ErrInvalidRequest},
		{"RSA 1024", smallPub, ErrInvalidRequest},
		{"RSA 2048", bigPub, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errUser := ca.SignUser(tt.pub, UserCert{UserID: "u-1", MaxTTL: time.Hour}, now)
			_, errHost := ca.SignHost(tt.pub, []string{"gw"}, time.Hour, now)
			_, errTicket := ca.SignTicket(tt.pub, Ticket{Node: "n", Allocation: "a", PosixUser: "p"}, now)
			for _, err := range []error{errUser, errHost, errTicket} {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got error %v; want %v", err, tt.wantErr)
				}
			}
		})
	}
}

func TestSignHost(t *testing.T) {
	ca := newAuthority(t, "host", newPrivateKey(t))
	pub := newSigner(t).PublicKey()
	tests := []struct {
		name       string
		principals []string
		validity   time.Duration
		wantErr    error
	}{
		{"one name", []string{"gw.example"}, 24 * time.Hour, nil},
		{"several names", []string{"gw.example", "localhost", "127.0.0.1"}, time.Hour, nil},
		{"no names", nil, time.Hour, ErrInvalidRequest},
		{"empty name", []string{"gw.example", ""}, time.Hour, ErrInvalidRequest},
		{"zero validity", []string{"gw.example"}, 0, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := ca.SignHost(pub, tt.principals, tt.validity, now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got, want := cert.CertType, uint32(ssh.HostCert); got != want {
				t.Fatalf("got type %d; want %d", got, want)
			}
			if got, want := int64(cert.ValidBefore), now.Add(tt.validity).Unix(); got != want {
				t.Fatalf("got ValidBefore %d; want %d", got, want)
			}
			if got, want := int64(cert.ValidAfter), now.Add(-ClockSkew).Unix(); got != want {
				t.Fatalf("got ValidAfter %d; want %d", got, want)
			}
			if len(cert.CriticalOptions)+len(cert.Extensions) != 0 {
				t.Fatalf("got options %v and extensions %v; want none", cert.CriticalOptions, cert.Extensions)
			}
			for _, p := range tt.principals {
				if err := VerifyHost(ca.Trusted(), p, reparse(t, cert), now); err != nil {
					t.Fatalf("got %v verifying for %s; want accepted", err, p)
				}
			}
		})
	}
}

func TestSignTicket(t *testing.T) {
	ca := newAuthority(t, "internal", newPrivateKey(t))
	pub := newSigner(t).PublicKey()
	tests := []struct {
		name    string
		ticket  Ticket
		wantTTL time.Duration
		wantErr error
	}{
		{"default TTL", Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "gpu_a1"}, time.Minute, nil},
		{"longest TTL", Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "gpu_a1", TTL: MaxTicketTTL}, MaxTicketTTL, nil},
		{"TTL too long", Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "gpu_a1", TTL: MaxTicketTTL + time.Second}, 0, ErrInvalidRequest},
		{"negative TTL", Ticket{Node: "n-1", Allocation: "a-1", PosixUser: "gpu_a1", TTL: -time.Second}, 0, ErrInvalidRequest},
		{"no node", Ticket{Allocation: "a-1", PosixUser: "gpu_a1"}, 0, ErrInvalidRequest},
		{"no allocation", Ticket{Node: "n-1", PosixUser: "gpu_a1"}, 0, ErrInvalidRequest},
		{"no POSIX user", Ticket{Node: "n-1", Allocation: "a-1"}, 0, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := ca.SignTicket(pub, tt.ticket, now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			wantOpts := map[string]string{"gpuaas-node": "n-1", "gpuaas-allocation": "a-1", "gpuaas-posix-user": "gpu_a1"}
			if !maps.Equal(cert.CriticalOptions, wantOpts) {
				t.Fatalf("got critical options %v; want %v", cert.CriticalOptions, wantOpts)
			}
			if len(cert.ValidPrincipals) != 1 || cert.ValidPrincipals[0] != "gpu_a1" {
				t.Fatalf("got principals %q; want [gpu_a1]", cert.ValidPrincipals)
			}
			if got, want := cert.KeyId, "ticket a-1@n-1"; got != want {
				t.Fatalf("got key id %q; want %q", got, want)
			}
			if got, want := int64(cert.ValidBefore), now.Add(tt.wantTTL).Unix(); got != want {
				t.Fatalf("got ValidBefore %d; want %d", got, want)
			}
			if got, want := int64(cert.ValidAfter), now.Add(-TicketSkew).Unix(); got != want {
				t.Fatalf("got ValidAfter %d; want %d", got, want)
			}
		})
	}
}

// TestSignUserSessionID: the login session travels in an extension (never
// a critical option, which OpenSSH servers that do not know it would
// refuse) and comes back out of VerifyUser.
func TestSignUserSessionID(t *testing.T) {
	ca := newAuthority(t, "user", newPrivateKey(t))
	pub := newSigner(t).PublicKey()
	tests := []struct {
		name    string
		session string
		wantErr error
	}{
		{"with a session", "s-0123456789ab", nil},
		{"without", "", nil},
		{"session id with a space", "s 1", ErrInvalidRequest},
		{"session id with a comma", "s-1,s-2", ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := ca.SignUser(pub, UserCert{UserID: "u-1", MaxTTL: time.Hour, SessionID: tt.session}, now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			got, ok := cert.Extensions[ExtensionSessionID]
			if ok != (tt.session != "") || got != tt.session {
				t.Fatalf("got extension %q (present %v); want %q", got, ok, tt.session)
			}
			if len(cert.CriticalOptions) != 0 {
				t.Fatalf("got critical options %v; want none", cert.CriticalOptions)
			}
			id, err := VerifyUser(ca.Trusted(), reparse(t, cert), "u-1", now)
			if err != nil || id.SessionID != tt.session {
				t.Fatalf("verified: got session %q, %v; want %q", id.SessionID, err, tt.session)
			}
			// What OpenSSH's own checker makes of it: accepted.
			checker := &ssh.CertChecker{Clock: func() time.Time { return now }}
			if err := checker.CheckCert("u-1", reparse(t, cert).(*ssh.Certificate)); err != nil {
				t.Fatalf("x/crypto's checker: %v; want accepted", err)
			}
		})
	}
}
