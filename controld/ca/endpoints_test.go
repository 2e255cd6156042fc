package ca_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
)

// errDelegated stands for the server's refusal of a delegated session.
var errDelegated = api.Errorf(api.CodeForbidden, "delegated")

// caServed is the CA's endpoints over a fresh database whose CAs have
// their first keys.
type caServed struct {
	db   *pgxpool.Pool
	run  *mutate.Runner
	cas  *ca.Service
	defs []endpoint.Def
	now  time.Time
}

func serveCA(t *testing.T) *caServed {
	t.Helper()
	db := pool(t)
	s := &caServed{db: db, cas: newService(t, ""), now: time.Now().UTC().Truncate(time.Second)}
	if err := s.cas.Init(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return s.now }
	s.run = &mutate.Runner{Pool: db, Now: clock}
	s.defs = ca.Endpoints(ca.Deps{DB: db, CAs: s.cas, CertTTL: 12 * time.Hour, GatewayAddr: "gw.example.test:22",
		TrustBundle: func(context.Context) (*api.TrustBundle, error) {
			return &api.TrustBundle{Statement: "st", Signature: "sig"}, nil
		}, Delegated: errDelegated, Now: clock})
	return s
}

func (s *caServed) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// written is every row a CA endpoint writes: keys and their state, audit
// rows, events, idempotency records.
func (s *caServed) written(t *testing.T) int {
	return s.count(t, `SELECT (SELECT count(*) FROM ssh_ca_keys WHERE retired_at IS NULL) * 1000
		+ (SELECT count(*) FROM ssh_ca_keys WHERE active) * 100 + (SELECT count(*) FROM audit_logs)
		+ (SELECT count(*) FROM outbox_events) + (SELECT count(*) FROM idempotency_keys)`)
}

func operator() *endpoint.Request {
	return &endpoint.Request{Principal: &identity.Principal{UserID: "u-op", Role: api.RoleOperator}}
}

// user is a person's session that ends in an hour.
func (s *caServed) user(role string) *endpoint.Request {
	return &endpoint.Request{Principal: &identity.Principal{UserID: "u-alice", Email: "alice@example.test", Role: role,
		SessionID: "s-alice", ExpiresAt: s.now.Add(time.Hour)}}
}

func subjectKey(t *testing.T) (ssh.PublicKey, string) {
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

// certify runs ssh.cert for the user and returns the certificate.
func (s *caServed) certify(t *testing.T) *ssh.Certificate {
	t.Helper()
	_, line := subjectKey(t)
	got, err := endpointtest.Mutate[api.SSHCertResponse](t.Context(), s.run, endpointtest.Find(t, s.defs, api.EndpointSSHCert),
		s.user(api.RoleUser), api.SSHCertRequest{PublicKey: line})
	if err != nil {
		t.Fatalf("ssh.cert: %v", err)
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(got.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	cert, ok := pk.(*ssh.Certificate)
	if !ok {
		t.Fatalf("ssh.cert answered a %T", pk)
	}
	return cert
}

// TestRetiredKeyNeverSignsAgain: once a user CA key is retired, ca.rotate
// cannot make it the signing key again (conflict, nothing written), and
// ssh.cert signs with its successor.
func TestRetiredKeyNeverSignsAgain(t *testing.T) {
	s := serveCA(t)
	ctx := t.Context()
	rotate, retire := endpointtest.Find(t, s.defs, api.EndpointCARotate), endpointtest.Find(t, s.defs, api.EndpointCARetire)
	first := fingerprint(s.certify(t).SignatureKey)

	rotated, err := endpointtest.Mutate[api.CAListResponse](ctx, s.run, rotate, operator(), api.CARotateRequest{CA: api.CAUser})
	if err != nil || len(rotated.Keys) != 2 {
		t.Fatalf("rotate: %+v, %v; want two keys", rotated, err)
	}
	second := ""
	for _, k := range rotated.Keys {
		if k.Active {
			second = k.ID
		}
	}
	if second == "" || second == first {
		t.Fatalf("after the rotation the active key is %q; want a new one (the first was %s)", second, first)
	}
	if got := fingerprint(s.certify(t).SignatureKey); got != second {
		t.Fatalf("ssh.cert after the rotation signed with %s; want %s", got, second)
	}
	if _, err := endpointtest.Mutate[api.CAListResponse](ctx, s.run, retire, operator(),
		api.CARotateRequest{CA: api.CAUser, KeyID: first}); err != nil {
		t.Fatalf("retire %s: %v", first, err)
	}

	before := s.written(t)
	_, err = endpointtest.Mutate[api.CAListResponse](ctx, s.run, rotate, operator(), api.CARotateRequest{CA: api.CAUser, KeyID: first})
	if !errors.Is(err, api.ErrConflict) {
		t.Fatalf("activating the retired key: got %v; want conflict", err)
	}
	if after := s.written(t); after != before {
		t.Fatalf("rows after the refused activation: %d; want %d", after, before)
	}
	if got := fingerprint(s.certify(t).SignatureKey); got != second {
		t.Fatalf("ssh.cert after the refused activation signed with %s; want %s", got, second)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'ssh.cert_issue' AND detail->>'ca_key' = $1`, first); n != 1 {
		t.Fatalf("certificates the retired key signed: %d; want the one before the rotation", n)
	}
}

// TestSSHCertRefusals: the gateway's service principal and a delegated
// session get no certificate, a bad key none either, and nothing is
// written; a user's certificate names the user and the session and ends
// with the session.
func TestSSHCertRefusals(t *testing.T) {
	s := serveCA(t)
	ctx := t.Context()
	cert := endpointtest.Find(t, s.defs, api.EndpointSSHCert)
	_, line := subjectKey(t)
	delegated := s.user(api.RoleUser)
	delegated.Principal.Delegated = true
	before := s.written(t)
	for _, tt := range []struct {
		name string
		r    *endpoint.Request
		key  string
		want error
	}{
		{"gateway", s.user(api.RoleGateway), line, api.ErrForbidden},
		{"delegated", delegated, line, errDelegated},
		{"bad key", s.user(api.RoleUser), "ssh-ed25519 AAAA", api.ErrInvalidArgument},
	} {
		if _, err := endpointtest.Mutate[api.SSHCertResponse](ctx, s.run, cert, tt.r, api.SSHCertRequest{PublicKey: tt.key}); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v; want %v", tt.name, err, tt.want)
		}
	}
	if after := s.written(t); after != before {
		t.Fatalf("rows after refused certificates: %d; want %d", after, before)
	}
	c := s.certify(t)
	if len(c.ValidPrincipals) != 1 || c.ValidPrincipals[0] != "u-alice" || c.KeyId != "alice@example.test" ||
		c.ValidBefore != uint64(s.now.Add(time.Hour).Unix()) {
		t.Fatalf("certificate: principals %v, key id %q, valid before %d; want u-alice, alice@example.test, %d",
			c.ValidPrincipals, c.KeyId, c.ValidBefore, s.now.Add(time.Hour).Unix())
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = 'ssh.cert_issue' AND users = ARRAY['u-alice']
		AND payload->>'session_id' = 's-alice'`); n != 1 {
		t.Fatalf("ssh.cert_issue events told to the user: %d; want 1", n)
	}
}

// TestSSHCAsShowsTheInternalCAToGatewaysAndOperators: anyone may read
// the user and host CA keys, the gateway's address and the trust bundle;
// the internal CA's keys only the gateway and operators.
func TestSSHCAsShowsTheInternalCAToGatewaysAndOperators(t *testing.T) {
	s := serveCA(t)
	cas := endpointtest.Find(t, s.defs, api.EndpointSSHCAs)
	for _, tt := range []struct {
		name     string
		r        *endpoint.Request
		internal bool
	}{
		{"anonymous", &endpoint.Request{}, false},
		{"user", s.user(api.RoleUser), false},
		{"gateway", s.user(api.RoleGateway), true},
		{"operator", operator(), true},
	} {
		got, err := endpointtest.Read[api.SSHCAsResponse](t.Context(), cas, tt.r, api.Empty{})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(got.User) != 1 || len(got.Host) != 1 || got.Gateway != "gw.example.test:22" || got.Bundle == nil || got.Bundle.Signature != "sig" {
			t.Errorf("%s: %+v; want one user and one host key, the gateway and the bundle", tt.name, got)
		}
		if (len(got.Internal) == 1) != tt.internal || len(got.Internal) > 1 {
			t.Errorf("%s: internal CA keys %v; want listed=%v", tt.name, got.Internal, tt.internal)
		}
	}
}

// TestRotateAndRetireRefuseAmbiguousRequests: stage with a key id, a
// retire without one, and an unknown CA are refused before any
// transaction.
func TestRotateAndRetireRefuseAmbiguousRequests(t *testing.T) {
	s := serveCA(t)
	ctx := t.Context()
	rotate, retire := endpointtest.Find(t, s.defs, api.EndpointCARotate), endpointtest.Find(t, s.defs, api.EndpointCARetire)
	before := s.written(t)
	for _, tt := range []struct {
		name string
		d    endpoint.Def
		req  api.CARotateRequest
	}{
		{"rotate: stage and key id", rotate, api.CARotateRequest{CA: api.CAUser, Stage: true, KeyID: "SHA256:x"}},
		{"rotate: unknown CA", rotate, api.CARotateRequest{CA: "root"}},
		{"retire: no key id", retire, api.CARotateRequest{CA: api.CAUser}},
		{"retire: stage", retire, api.CARotateRequest{CA: api.CAUser, Stage: true, KeyID: "SHA256:x"}},
	} {
		if _, err := endpointtest.Mutate[api.CAListResponse](ctx, s.run, tt.d, operator(), tt.req); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("%s: got %v; want invalid_argument", tt.name, err)
		}
	}
	if after := s.written(t); after != before {
		t.Fatalf("rows after refused requests: %d; want %d", after, before)
	}
}
