package sshkeys

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

var t0 = time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)

// signer signs like controld, with a real CA, on clock; certificates end at
// validBefore. It counts its calls.
type signer struct {
	ca          *sshcert.Authority
	clock       *testutil.Clock
	validBefore time.Time
	calls       int
	otherKey    bool // answer with a certificate for another key
}

func newSigner(t *testing.T, clock *testutil.Clock) *signer {
	t.Helper()
	key, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := sshcert.New("user", key)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{ca: ca, clock: clock, validBefore: clock.Now().Add(8 * time.Hour)}
}

func (s *signer) sign(_ context.Context, req api.SSHCertRequest) (*api.SSHCertResponse, error) {
	s.calls++
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.PublicKey))
	if err != nil {
		return nil, err
	}
	if s.otherKey {
		other, _ := sshcert.GenerateKey()
		pub, _ = ssh.NewPublicKey(other.Public())
	}
	cert, err := s.ca.SignUser(pub, sshcert.UserCert{UserID: "u-1", KeyID: "ada@example.com", ValidBefore: s.validBefore}, s.clock.Now())
	if err != nil {
		return nil, err
	}
	return &api.SSHCertResponse{Certificate: string(ssh.MarshalAuthorizedKey(cert))}, nil
}

func newRenewer(t *testing.T, clock *testutil.Clock, s *signer) *Renewer {
	return &Renewer{Paths: For(t.TempDir(), "dev"), Context: "dev", Token: "tok",
		SessionExpiresAt: t0.Add(12 * time.Hour), Now: clock.Now, Sign: s.sign}
}

func TestRenewerRenewsOnlyWhenNeeded(t *testing.T) {
	tests := []struct {
		name        string
		certFor     time.Duration // validity of the certificate on disk; 0: none
		advance     time.Duration // clock moves before Ensure
		session     time.Duration // session end relative to t0
		token       string
		wantRenew   bool
		wantErrCode api.Code
	}{
		{name: "missing", wantRenew: true},
		{name: "fresh", certFor: time.Hour, advance: 30 * time.Minute},
		{name: "near expiry", certFor: time.Hour, advance: 56 * time.Minute, wantRenew: true},
		{name: "exactly at the renewal margin", certFor: time.Hour, advance: 55 * time.Minute, wantRenew: true},
		{name: "expired", certFor: time.Hour, advance: 2 * time.Hour, wantRenew: true},
		{name: "expired, session expired", certFor: time.Hour, advance: 2 * time.Hour, session: 90 * time.Minute,
			wantErrCode: api.CodeUnauthenticated},
		{name: "missing, not logged in", token: "-", wantErrCode: api.CodeUnauthenticated},
		{name: "fresh, session expired: no renewal needed", certFor: time.Hour, advance: 10 * time.Minute, session: 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testutil.NewClock(t0)
			s := newSigner(t, clock)
			r := newRenewer(t, clock, s)
			if tt.session != 0 {
				r.SessionExpiresAt = t0.Add(tt.session)
			}
			if tt.token == "-" {
				r.Token = ""
			}
			if tt.certFor != 0 {
				s.validBefore = t0.Add(tt.certFor)
				if _, err := r.Renew(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			before := s.calls
			clock.Advance(tt.advance)
			s.validBefore = clock.Now().Add(8 * time.Hour)

			id, err := r.Ensure(context.Background())
			if tt.wantErrCode != "" {
				var apiErr *api.Error
				if !errors.As(err, &apiErr) || apiErr.Code != tt.wantErrCode {
					t.Fatalf("got %v; want a %s error", err, tt.wantErrCode)
				}
				if s.calls != before {
					t.Error("got a signing request; want none without a session")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if renewed := s.calls > before; renewed != tt.wantRenew || id.Renewed != tt.wantRenew {
				t.Errorf("got renewed %v (Identity.Renewed %v); want %v", renewed, id.Renewed, tt.wantRenew)
			}
			onDisk, err := ReadCert(r.Paths.Cert)
			if err != nil {
				t.Fatal(err)
			}
			if !Fresh(onDisk, id.Key, clock.Now()) || string(onDisk.Marshal()) != string(id.Cert.Marshal()) {
				t.Error("got a stale or different certificate on disk; want the fresh one returned")
			}
		})
	}
}

func TestRenewerReplacesCertificateOfAnotherKey(t *testing.T) {
	clock := testutil.NewClock(t0)
	s := newSigner(t, clock)
	r := newRenewer(t, clock, s)
	if _, err := r.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The key is replaced by hand: the certificate no longer matches it.
	if err := os.Remove(r.Paths.Key); err != nil {
		t.Fatal(err)
	}
	id, err := r.Ensure(context.Background())
	if err != nil || !id.KeyCreated || !id.Renewed {
		t.Fatalf("got %+v, %v; want a new key and a new certificate", id, err)
	}
}

func TestRenewerRejectsCertificateForAnotherKey(t *testing.T) {
	clock := testutil.NewClock(t0)
	s := newSigner(t, clock)
	s.otherKey = true
	r := newRenewer(t, clock, s)
	if _, err := r.Ensure(context.Background()); !errors.Is(err, ErrBadCertificate) {
		t.Fatalf("got %v; want ErrBadCertificate", err)
	}
	if _, err := os.Stat(r.Paths.Cert); !os.IsNotExist(err) {
		t.Error("a certificate for another key was stored")
	}
}

func TestRenewerPassesServerRefusalThrough(t *testing.T) {
	clock := testutil.NewClock(t0)
	r := newRenewer(t, clock, newSigner(t, clock))
	r.Sign = func(context.Context, api.SSHCertRequest) (*api.SSHCertResponse, error) {
		return nil, &api.Error{Code: api.CodeUnauthenticated, Message: "session revoked"}
	}
	_, err := r.Ensure(context.Background())
	if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "session revoked") {
		t.Fatalf("got %v; want the server's unauthenticated error", err)
	}
}

func TestIdentityExpiresSoon(t *testing.T) {
	clock := testutil.NewClock(t0)
	s := newSigner(t, clock)
	s.validBefore = t0.Add(3 * time.Minute) // the session ends then
	r := newRenewer(t, clock, s)
	r.SessionExpiresAt = s.validBefore
	id, err := r.Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !id.ExpiresSoon(clock.Now()) {
		t.Error("got ExpiresSoon false for a certificate ending in 3 minutes")
	}
}

func TestRemoveCertKeepsKey(t *testing.T) {
	clock := testutil.NewClock(t0)
	r := newRenewer(t, clock, newSigner(t, clock))
	if _, err := r.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if removed, err := RemoveCert(r.Paths); err != nil || !removed {
		t.Fatalf("got %v, %v; want removed", removed, err)
	}
	if removed, err := RemoveCert(r.Paths); err != nil || removed {
		t.Fatalf("got %v, %v; want nothing to remove", removed, err)
	}
	if _, err := os.Stat(r.Paths.Key); err != nil {
		t.Errorf("key gone with the certificate: %v", err)
	}
}
