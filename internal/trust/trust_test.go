package trust

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/trustbundle"
)

var t0 = time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// caLine is a fresh host CA key in authorized_keys form, and its
// fingerprint.
func caLine(t *testing.T) (string, string) {
	t.Helper()
	k, err := ssh.NewPublicKey(newKey(t).Public())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))), ssh.FingerprintSHA256(k)
}

func sign(t *testing.T, key ed25519.PrivateKey, st trustbundle.Statement) *api.TrustBundle {
	t.Helper()
	b, err := trustbundle.Sign(key, st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheck(t *testing.T) {
	server, forger := newKey(t), newKey(t)
	serverLine, _ := trustbundle.ServerKeyLine(server.Public().(ed25519.PublicKey))
	oldCA, oldFP := caLine(t)
	newCA, newFP := caLine(t)
	evilCA, _ := caLine(t)
	pinned := &clientconfig.Trust{ServerKey: serverLine, HostCAs: []string{oldCA}, Gateway: "gw.example.com:22",
		IssuedAt: t0, PinnedAt: t0.Add(-time.Hour)}
	afterRetire := &clientconfig.Trust{ServerKey: serverLine, HostCAs: []string{newCA}, RetiredHostCAs: []string{oldFP},
		Gateway: "gw.example.com:22", IssuedAt: t0}
	st := func(at time.Time, gw string, retired []string, cas ...string) trustbundle.Statement {
		return trustbundle.Statement{HostCAs: cas, RetiredHostCAs: retired, Gateway: gw, IssuedAt: at}
	}
	later := t0.Add(time.Minute)

	tests := []struct {
		name        string
		pinned      *clientconfig.Trust
		bundle      *api.TrustBundle
		wantErr     string // empty: accepted
		wantChanged bool
		wantNote    string
	}{
		{name: "first use", bundle: sign(t, server, st(t0, "gw.example.com:22", nil, oldCA)),
			wantChanged: true, wantNote: "pinned the server key"},
		{name: "unchanged", pinned: pinned, bundle: sign(t, server, st(later, "gw.example.com:22", nil, oldCA))},
		{name: "unchanged, replayed from before", pinned: pinned, bundle: sign(t, server, st(t0.Add(-time.Hour), "gw.example.com:22", nil, oldCA))},
		{name: "rotation: a staged key", pinned: pinned, bundle: sign(t, server, st(later, "gw.example.com:22", nil, oldCA, newCA)),
			wantChanged: true, wantNote: "new host CA key " + newFP},
		{name: "rotation: old key retired", pinned: pinned, bundle: sign(t, server, st(later, "gw.example.com:22", []string{oldFP}, newCA)),
			wantChanged: true, wantNote: "retired host CA key " + oldFP},
		{name: "gateway moved, signed", pinned: pinned, bundle: sign(t, server, st(later, "gw2.example.com:22", nil, oldCA)),
			wantChanged: true, wantNote: `moved from "gw.example.com:22" to "gw2.example.com:22"`},
		{name: "server key given ahead", pinned: &clientconfig.Trust{ServerKey: trustbundle.Fingerprint(serverLine)},
			bundle: sign(t, server, st(t0, "gw.example.com:22", nil, oldCA)), wantChanged: true, wantNote: "confirmed the server key"},

		{name: "no bundle", pinned: pinned, wantErr: "no signed trust bundle"},
		{name: "no bundle at first use", wantErr: "no signed trust bundle"},
		{name: "forged: another server key", pinned: pinned, bundle: sign(t, forger, st(later, "evil.example.com:22", nil, evilCA)),
			wantErr: "but this context trusts " + trustbundle.Fingerprint(serverLine)},
		{name: "forged: other key than the one given ahead", pinned: &clientconfig.Trust{ServerKey: trustbundle.Fingerprint(serverLine)},
			bundle: sign(t, forger, st(t0, "gw.example.com:22", nil, evilCA)), wantErr: "but this context trusts"},
		{name: "gateway changed under a signature", pinned: pinned,
			bundle:  tamper(t, sign(t, server, st(later, "gw.example.com:22", nil, oldCA)), "gw.example.com:22", "evil.example.com:22"),
			wantErr: "signature does not verify"},
		{name: "downgrade: a pinned key dropped", pinned: pinned, bundle: sign(t, server, st(later, "gw.example.com:22", nil, newCA)),
			wantErr: "drops the pinned host CA key " + oldFP},
		{name: "downgrade: a retired key back", pinned: afterRetire, bundle: sign(t, server, st(later, "gw.example.com:22", []string{oldFP}, oldCA, newCA)),
			wantErr: "trusts the host CA key " + oldFP + " again"},
		{name: "downgrade: the overlap replayed", pinned: afterRetire, bundle: sign(t, server, st(t0.Add(-time.Hour), "gw.example.com:22", nil, oldCA, newCA)),
			wantErr: "trusts the host CA key " + oldFP + " again"},
		{name: "downgrade: a retirement forgotten", pinned: afterRetire, bundle: sign(t, server, st(later, "gw.example.com:22", nil, newCA)),
			wantErr: "no longer lists the host CA key " + oldFP + " as retired"},
		{name: "downgrade: an older change", pinned: pinned, bundle: sign(t, server, st(t0.Add(-time.Minute), "old-gw.example.com:22", nil, oldCA)),
			wantErr: "older"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Check(tt.pinned, tt.bundle, t0)
			if tt.wantErr != "" {
				var apiErr *api.Error
				if !errors.Is(err, api.ErrConflict) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, tt.wantErr) ||
					!strings.Contains(apiErr.Hint, "gpuaas context trust --reset") {
					t.Fatalf("got %v; want a conflict with %q and the reset hint", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Changed != tt.wantChanged || !strings.Contains(strings.Join(d.Notes, "\n"), tt.wantNote) {
				t.Fatalf("got changed %v, notes %q; want %v with %q", d.Changed, d.Notes, tt.wantChanged, tt.wantNote)
			}
			if d.Pins.ServerKey != serverLine || !equal(d.Pins.HostCAs, d.Statement.HostCAs) || d.Pins.Gateway != d.Statement.Gateway {
				t.Fatalf("got pins %+v; want the bundle's %+v", d.Pins, d.Statement)
			}
			if tt.pinned != nil && !tt.pinned.PinnedAt.IsZero() && !d.Pins.PinnedAt.Equal(tt.pinned.PinnedAt) {
				t.Errorf("pinned at %s; want the first pin's %s kept", d.Pins.PinnedAt, tt.pinned.PinnedAt)
			}
		})
	}
}

func equal(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// tamper rewrites a string inside the signed statement, keeping the
// signature.
func tamper(t *testing.T, b *api.TrustBundle, from, to string) *api.TrustBundle {
	t.Helper()
	body, err := base64.StdEncoding.DecodeString(b.Statement)
	if err != nil || !bytes.Contains(body, []byte(from)) {
		t.Fatalf("statement %s (%v) does not hold %q", body, err, from)
	}
	body = bytes.ReplaceAll(body, []byte(from), []byte(to))
	return &api.TrustBundle{Statement: base64.StdEncoding.EncodeToString(body), Signature: b.Signature}
}

func TestVerifyLogin(t *testing.T) {
	server, forger := newKey(t), newKey(t)
	serverLine, _ := trustbundle.ServerKeyLine(server.Public().(ed25519.PublicKey))
	token := func(key ed25519.PrivateKey, sub, sid string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.RegisteredClaims{Subject: sub, ID: sid,
			ExpiresAt: jwt.NewNumericDate(t0.Add(-time.Hour))}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	reply := func(tok string) *api.LoginResponse {
		return &api.LoginResponse{Token: tok, SessionID: "s-1", User: api.User{ID: "u-1"}}
	}
	tests := []struct {
		name    string
		resp    *api.LoginResponse
		wantErr string
	}{
		// The CLI's clock judges nothing: an expired window still verifies.
		{"signed by the server", reply(token(server, "u-1", "s-1")), ""},
		{"signed by another key", reply(token(forger, "u-1", "s-1")), "not signed by the server key"},
		{"not a token", reply("session-token"), "not signed by the server key"},
		{"for another user", reply(token(server, "u-2", "s-1")), `for user "u-2"`},
		{"for another session", reply(token(server, "u-1", "s-9")), `session "s-9"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyLogin(serverLine, tt.resp)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v; want a refusal with %q", err, tt.wantErr)
			}
		})
	}
}
