package busauth

import (
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// TestOpenRequestRefusesGarbage: only the NATS servers can publish on the
// callout subject, but whatever arrives there is checked: undecryptable,
// undecodable, unsigned or incomplete requests are dropped with an error,
// never a panic or a decision.
func TestOpenRequestRefusesGarbage(t *testing.T) {
	ours, err := nkeys.CreateCurveKeys()
	if err != nil {
		t.Fatal(err)
	}
	server, err := nkeys.CreateCurveKeys()
	if err != nil {
		t.Fatal(err)
	}
	serverPub, _ := server.PublicKey()
	ourPub, _ := ours.PublicKey()
	serverKey, _ := nkeys.CreateServer()
	userKey, _ := nkeys.CreateUser()
	userPub, _ := userKey.PublicKey()
	valid := func(mut func(*jwt.AuthorizationRequestClaims)) string {
		claim := jwt.NewAuthorizationRequestClaims("AISSUER")
		claim.UserNkey = userPub
		claim.Server.ID = "NSERVER"
		claim.Expires = time.Now().Add(time.Minute).Unix()
		if mut != nil {
			mut(claim)
		}
		s, err := claim.Encode(serverKey)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	seal := func(s string) []byte {
		b, err := server.Seal([]byte(s), ourPub)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := openRequest(ours, serverPub, seal(valid(nil))); err != nil {
		t.Fatalf("a well-formed request: %v", err)
	}
	tampered := []byte(valid(nil))
	tampered[len(tampered)-5] ^= 1
	tests := []struct {
		name string
		xkey string
		data []byte
	}{
		{"empty", serverPub, nil},
		{"garbage", serverPub, []byte("garbage")},
		{"not sealed for us", serverPub, []byte(valid(nil))},
		{"sealed by another server", "XBADKEY", seal(valid(nil))},
		{"plaintext garbage", "", []byte("eyJ0eXAiOiJKV1QifQ.e30.c2ln")},
		{"bad signature", "", tampered},
		{"no user nkey", serverPub, seal(valid(func(c *jwt.AuthorizationRequestClaims) { c.UserNkey = "" }))},
		{"no server id", serverPub, seal(valid(func(c *jwt.AuthorizationRequestClaims) { c.Server.ID = "" }))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if req, err := openRequest(ours, tt.xkey, tt.data); err == nil {
				t.Fatalf("got request %+v; want an error", req)
			}
		})
	}
}
