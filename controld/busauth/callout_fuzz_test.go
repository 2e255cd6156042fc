package busauth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// fuzzKeys are made from fixed bytes so that the requests kept in
// testdata/fuzz stay sealed for, and signed by, the keys the targets use.
func fuzzKey(f *testing.F, seed byte, mk func(r *bytes.Reader) (nkeys.KeyPair, error)) (nkeys.KeyPair, string) {
	kp, err := mk(bytes.NewReader(bytes.Repeat([]byte{seed}, 64)))
	if err != nil {
		f.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		f.Fatal(err)
	}
	return kp, pub
}

func curve(r *bytes.Reader) (nkeys.KeyPair, error) { return nkeys.CreateCurveKeysWithRand(r) }

func pair(prefix nkeys.PrefixByte) func(r *bytes.Reader) (nkeys.KeyPair, error) {
	return func(r *bytes.Reader) (nkeys.KeyPair, error) { return nkeys.CreatePairWithRand(prefix, r) }
}

// FuzzOpenRequest feeds the callout what arrives on its subject: sealed
// with the server's xkey (the header names it) or plain. Properties: a
// request or an error, never both; an opened request has a user nkey and
// a server id, and is one the server's key signed (the fuzzer cannot
// make a request the callout would decide on).
func FuzzOpenRequest(f *testing.F) {
	ours, ourPub := fuzzKey(f, 1, curve)
	server, serverXPub := fuzzKey(f, 2, curve)
	serverKey, serverPub := fuzzKey(f, 3, pair(nkeys.PrefixByteServer))
	_, userPub := fuzzKey(f, 4, pair(nkeys.PrefixByteUser))
	request := func(mut func(*jwt.AuthorizationRequestClaims)) string {
		claim := jwt.NewAuthorizationRequestClaims("AISSUER")
		claim.UserNkey = userPub
		claim.Server.ID = "NSERVER"
		claim.ConnectOptions.Token = "session-token"
		claim.ClientInformation.Host = "127.0.0.1:4222"
		claim.Expires = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		if mut != nil {
			mut(claim)
		}
		s, err := claim.Encode(serverKey)
		if err != nil {
			f.Fatal(err)
		}
		return s
	}
	seal := func(s string) []byte {
		b, err := server.Seal([]byte(s), ourPub)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	if _, err := openRequest(ours, serverXPub, seal(request(nil))); err != nil {
		f.Fatalf("the server's own request: %v", err)
	}
	f.Add(seal(request(nil)), true)
	f.Add([]byte(request(nil)), false)
	f.Add([]byte(request(func(c *jwt.AuthorizationRequestClaims) { c.Server.ID = "" })), false)
	f.Add(seal(request(func(c *jwt.AuthorizationRequestClaims) { c.ConnectOptions.Nkey = userPub })), true)
	f.Add([]byte("eyJ0eXAiOiJKV1QifQ.e30.c2ln"), false)
	f.Fuzz(func(t *testing.T, data []byte, sealed bool) {
		xkey := ""
		if sealed {
			xkey = serverXPub
		}
		req, err := openRequest(ours, xkey, data)
		if err != nil {
			if req != nil {
				t.Fatalf("got request %+v and error %v", req, err)
			}
			return
		}
		if req.UserNkey == "" || req.Server.ID == "" {
			t.Fatalf("opened an incomplete request %+v", req)
		}
		if req.Issuer != serverPub || req.UserNkey != userPub || req.Server.ID != "NSERVER" {
			t.Fatalf("opened a request the server did not sign: %+v", req)
		}
	})
}

// FuzzVerifyNonce feeds the nonce check the nkey, signature and nonce a
// connecting client presents. Properties: it accepts only the nonce the
// key signed, with that key and that signature (however it is encoded);
// a refusal is a refusedError, safe to tell the server.
func FuzzVerifyNonce(f *testing.F) {
	user, userPub := fuzzKey(f, 5, pair(nkeys.PrefixByteUser))
	_, accountPub := fuzzKey(f, 6, pair(nkeys.PrefixByteAccount))
	const nonce = "yYOlQ7lW1CbWxL4"
	raw, err := user.Sign([]byte(nonce))
	if err != nil {
		f.Fatal(err)
	}
	sig := base64.RawURLEncoding.EncodeToString(raw)
	if err := verifyNonce(userPub, sig, nonce); err != nil {
		f.Fatalf("the client's own signature: %v", err)
	}
	f.Add(userPub, sig, nonce)
	f.Add(userPub, base64.StdEncoding.EncodeToString(raw), nonce)
	f.Add(accountPub, sig, nonce)
	f.Add(userPub, sig, "")
	f.Fuzz(func(t *testing.T, pub, sig, nonceGot string) {
		err := verifyNonce(pub, sig, nonceGot)
		if err != nil {
			var r *refusedError
			if !errors.As(err, &r) {
				t.Fatalf("refusal %v is not a refusedError", err)
			}
			return
		}
		decoded, derr := base64.RawURLEncoding.DecodeString(sig)
		if derr != nil {
			decoded, derr = base64.StdEncoding.DecodeString(sig)
		}
		if pub != userPub || nonceGot != nonce || derr != nil || !bytes.Equal(decoded, raw) {
			t.Fatalf("accepted key %q, signature %q (%x) for nonce %q", pub, sig, decoded, nonceGot)
		}
	})
}
