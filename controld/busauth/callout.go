package busauth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// xkeyHeader carries the requesting server's curve key.
const xkeyHeader = "Nats-Server-Xkey"

// calloutTimeout bounds one decision (the servers wait 2 s by default).
const calloutTimeout = 1500 * time.Millisecond

func (s *Service) onRequest(m *nats.Msg) {
	select {
	case s.sem <- struct{}{}:
	default:
		// Overloaded: the server times the request out and refuses the
		// connection; the client retries.
		s.cfg.Log.Warn("auth callout: too many in flight, dropped a request")
		return
	}
	s.wg.Add(1)
	go func() {
		defer func() { <-s.sem; s.wg.Done() }()
		s.handle(m)
	}()
}

// handle decides one connection and answers the server. A request that
// cannot be read is dropped (the server then refuses the connection).
func (s *Service) handle(m *nats.Msg) {
	serverXKey := m.Header.Get(xkeyHeader)
	req, err := openRequest(s.cfg.Keys.XKey, serverXKey, m.Data)
	if err != nil {
		s.cfg.Log.Warn("auth callout: dropped a request", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), calloutTimeout)
	defer cancel()
	g, err := s.decide(ctx, req)
	resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	resp.Audience = req.Server.ID
	if err != nil {
		s.cfg.Log.Info("nats connection refused", "host", req.ClientInformation.Host,
			"name", req.ClientInformation.Name, "reason", err)
		resp.Error = refusal(err)
	} else if resp.Jwt, err = s.userJWT(req, g); err != nil {
		s.cfg.Log.Error("auth callout: sign user jwt", "err", err)
		resp.Error = "internal error"
		g = nil
	}
	out, err := resp.Encode(s.cfg.Keys.Issuer)
	if err != nil {
		s.cfg.Log.Error("auth callout: sign response", "err", err)
		return
	}
	body := []byte(out)
	if serverXKey != "" {
		if body, err = s.cfg.Keys.XKey.Seal(body, serverXKey); err != nil {
			s.cfg.Log.Error("auth callout: seal response", "err", err)
			return
		}
	}
	if g != nil && g.kind == KindPreLogin {
		// Recorded before the reply: the login that follows looks its
		// source up by the connection's key.
		s.record(ctx, req, g)
	}
	if err := m.Respond(body); err != nil {
		s.cfg.Log.Warn("auth callout: respond", "err", err)
		return
	}
	if g != nil && g.kind != KindPreLogin {
		s.record(ctx, req, g)
	}
}

// openRequest decrypts (when the server sent its xkey) and decodes a
// callout request, checking the server's signature on it.
func openRequest(xkey nkeys.KeyPair, serverXKey string, data []byte) (*jwt.AuthorizationRequestClaims, error) {
	if serverXKey != "" {
		var err error
		if data, err = xkey.Open(data, serverXKey); err != nil {
			return nil, fmt.Errorf("undecryptable request: %w", err)
		}
	}
	req, err := jwt.DecodeAuthorizationRequestClaims(string(data))
	if err != nil {
		return nil, fmt.Errorf("malformed request: %w", err)
	}
	if req.UserNkey == "" || req.Server.ID == "" {
		return nil, errors.New("malformed request: no user nkey or server id")
	}
	return req, nil
}

// refusal is what the server is told (and logs) about a refused
// connection: the reason, without secrets.
func refusal(err error) string {
	var r *refusedError
	if errors.As(err, &r) {
		return r.reason
	}
	return "internal error"
}

func (s *Service) userJWT(req *jwt.AuthorizationRequestClaims, g *grant) (string, error) {
	uc := jwt.NewUserClaims(req.UserNkey)
	uc.Audience = g.account
	uc.Name = g.kind + ":" + g.principal
	wall := s.cfg.ServerNow()
	uc.IssuedAt = wall.Unix()
	uc.Expires = wall.Add(g.expires.Sub(s.now())).Unix()
	uc.Permissions = g.perms
	return uc.Encode(s.cfg.Keys.Issuer)
}

// verifyNonce checks that the client signed the server's nonce with the
// key it claims.
func verifyNonce(pub, sig, nonce string) error {
	if nonce == "" || sig == "" {
		return refused("nkey given without a signed nonce")
	}
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil || nkeys.Prefix(pub) != nkeys.PrefixByteUser {
		return refused("malformed nkey")
	}
	// The base32 decoder skips line breaks: "UAB\rC..." is the key of
	// "UABC...". Only the canonical string is accepted, so that the key
	// names one identity wherever it is looked up or used (registered
	// keys, revocations, nodes, inboxes).
	if canonical, err := kp.PublicKey(); err != nil || canonical != pub {
		return refused("malformed nkey")
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return refused("malformed nonce signature")
		}
	}
	if kp.Verify([]byte(nonce), raw) != nil {
		return refused("bad nonce signature")
	}
	return nil
}

// sourceHost is the client's address without its port.
func sourceHost(ci jwt.ClientInformation) string {
	if h, _, err := net.SplitHostPort(ci.Host); err == nil {
		return h
	}
	return ci.Host
}

// refusedError is a refusal with a reason safe to tell the server.
type refusedError struct{ reason string }

func (e *refusedError) Error() string { return e.reason }

func refused(format string, args ...any) error {
	return &refusedError{reason: fmt.Sprintf(format, args...)}
}
