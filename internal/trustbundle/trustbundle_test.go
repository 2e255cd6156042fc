package trustbundle

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
)

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func hostCA(t *testing.T) string {
	t.Helper()
	k, err := ssh.NewPublicKey(newKey(t).Public())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

func TestSignOpen(t *testing.T) {
	key := newKey(t)
	st := Statement{HostCAs: []string{hostCA(t), hostCA(t)}, RetiredHostCAs: []string{"SHA256:x"},
		Gateway: "gw.example.com:22", IssuedAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	b, err := Sign(key, st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(b)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := ServerKeyLine(key.Public().(ed25519.PublicKey))
	if got.ServerKey != line || got.Version != Version || got.Gateway != st.Gateway || len(got.HostCAs) != 2 ||
		got.HostCAs[1] != st.HostCAs[1] || got.RetiredHostCAs[0] != "SHA256:x" || !got.IssuedAt.Equal(st.IssuedAt) {
		t.Fatalf("got %+v; want %+v signed by %s", got, st, line)
	}
	if Fingerprint(got.ServerKey) == "" || !strings.HasPrefix(Fingerprint(got.ServerKey), "SHA256:") {
		t.Errorf("fingerprint of %q: %q", got.ServerKey, Fingerprint(got.ServerKey))
	}
}

func TestOpenRefuses(t *testing.T) {
	key, other := newKey(t), newKey(t)
	good, err := Sign(key, Statement{HostCAs: []string{hostCA(t)}, Gateway: "gw:22"})
	if err != nil {
		t.Fatal(err)
	}
	statement := func(b *api.TrustBundle) Statement {
		raw, _ := base64.StdEncoding.DecodeString(b.Statement)
		var st Statement
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	reencode := func(st Statement, sig string) *api.TrustBundle {
		body, _ := json.Marshal(st)
		return &api.TrustBundle{Statement: base64.StdEncoding.EncodeToString(body), Signature: sig}
	}
	otherLine, _ := ServerKeyLine(other.Public().(ed25519.PublicKey))
	moved := statement(good)
	moved.Gateway = "evil:22"
	swapped := statement(good)
	swapped.ServerKey = otherLine // claims another signer, keeps the signature
	v2 := statement(good)
	v2.Version = 2
	noCAs, err := Sign(key, Statement{Gateway: "gw:22"})
	if err != nil {
		t.Fatal(err)
	}
	rsaLike := statement(good)
	rsaLike.ServerKey = hostCA(t)
	// A JWT-style signature by the same key over other bytes is no bundle
	// signature.
	jwtSig := base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte("eyJhbGciOiJFZERTQSJ9."+good.Statement)))

	tests := []struct {
		name string
		b    *api.TrustBundle
	}{
		{"none", nil},
		{"changed gateway", reencode(moved, good.Signature)},
		{"another signer named", reencode(swapped, good.Signature)},
		{"another version", reencode(v2, good.Signature)},
		{"no host CA keys", noCAs},
		{"not base64", &api.TrustBundle{Statement: "%%%", Signature: good.Signature}},
		{"short signature", &api.TrustBundle{Statement: good.Statement, Signature: "AAAA"}},
		{"signature over other bytes", &api.TrustBundle{Statement: good.Statement, Signature: jwtSig}},
		{"server key mismatch", reencode(rsaLike, good.Signature)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Open(tt.b); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v; want ErrInvalid", err)
			}
		})
	}
}
