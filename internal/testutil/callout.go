package testutil

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/internal/bus"
)

// Credentials is what a connection presented, as a callout sees it. Nkey
// is set only when the connection proved it holds the key.
type Credentials struct {
	Token string
	Nkey  string
}

// Grant is what a stand-in callout lets a connection do in the app account.
type Grant struct {
	Pub, Sub []string
}

// ServeCallout answers the bus's auth callout with decide, for tests
// whose controld is a stand-in (see internal/sshkeys/sshkeystest): the
// connections of the CLI under test then go through the same kind of
// callout as against a real controld. decide returns an error to refuse.
func (b *Bus) ServeCallout(t testing.TB, decide func(Credentials) (Grant, error)) {
	t.Helper()
	nc := b.Connect(t)
	_, err := nc.Subscribe("$SYS.REQ.USER.AUTH", func(m *nats.Msg) {
		xkey := m.Header.Get("Nats-Server-Xkey")
		data, err := b.Keys.XKey.Open(m.Data, xkey)
		if err != nil {
			return
		}
		req, err := jwt.DecodeAuthorizationRequestClaims(string(data))
		if err != nil {
			return
		}
		resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
		resp.Audience = req.Server.ID
		creds := Credentials{Token: req.ConnectOptions.Token}
		if k := req.ConnectOptions.Nkey; k != "" {
			if err := checkNonce(k, req.ConnectOptions.SignedNonce, req.ClientInformation.Nonce); err != nil {
				resp.Error = err.Error()
			}
			creds.Nkey = k
		}
		if resp.Error == "" {
			if g, err := decide(creds); err != nil {
				resp.Error = err.Error()
			} else {
				uc := jwt.NewUserClaims(req.UserNkey)
				uc.Audience = bus.AppAccount
				uc.Expires = time.Now().Add(time.Hour).Unix()
				uc.Permissions.Pub.Allow.Add(g.Pub...)
				uc.Permissions.Sub.Allow.Add(g.Sub...)
				resp.Jwt, _ = uc.Encode(b.Keys.Issuer)
			}
		}
		out, err := resp.Encode(b.Keys.Issuer)
		if err != nil {
			return
		}
		sealed, err := b.Keys.XKey.Seal([]byte(out), xkey)
		if err != nil {
			return
		}
		_ = m.Respond(sealed)
	})
	if err != nil {
		t.Fatalf("serve callout: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("serve callout: %v", err)
	}
}

func checkNonce(pub, sig, nonce string) error {
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return err
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return err
	}
	if kp.Verify([]byte(nonce), raw) != nil {
		return errors.New("bad nonce signature")
	}
	return nil
}
