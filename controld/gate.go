package controld

import (
	"context"
	"crypto/ed25519"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// Revocation at the gateway. A user certificate names the login session
// it was minted under (sshcert.ExtensionSessionID). controld honours a
// certificate for the gateway — a ticket to a node (gate.authorize), a
// delegated session for commands over SSH (gate.user_token) — only while
// that session is live: not logged out, not disabled, not expired. The
// gateway also asks, in one batch, about the sessions of its open
// connections (gate.sessions), and is told at once of revocations on
// gateproto.GateRevokedSubject (see outbox.Fanout).

// reloginHint is what a user whose certificate no longer counts should do
// (the message says "run `gpuaas login`" already: the gateway shows users
// the message alone).
const reloginHint = "`gpuaas login` issues a new certificate; `gpuaas ssh-config` refreshes the SSH files"

// parseGateCert reads the certificate a gateway request carries.
func parseGateCert(line string) (ssh.PublicKey, error) {
	if line == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "certificate is required")
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "certificate is not an SSH certificate: %v", err)
	}
	return key, nil
}

// verifyGateCert checks that key is a user certificate of the user CA for
// userID, valid now, whose login session is live, and returns what it
// says. Every refusal is forbidden: the gateway asking is authenticated,
// the certificate it was shown is what does not count.
func (s *Server) verifyGateCert(ctx context.Context, q store.Querier, key ssh.PublicKey, userID string) (sshcert.Identity, error) {
	uca, err := s.cas.Authority(ctx, q, api.CAUser)
	if err != nil {
		return sshcert.Identity{}, err
	}
	id, err := sshcert.VerifyUser(uca.Trusted(), key, userID, s.now())
	if err != nil {
		return sshcert.Identity{}, api.Errorf(api.CodeForbidden, "the certificate does not prove %s: %v", userID, err)
	}
	if id.SessionID == "" {
		return id, api.Errorf(api.CodeForbidden, "this SSH certificate names no login session (it was issued before logins were tied to certificates); run `gpuaas login`").
			WithHint(reloginHint)
	}
	ended, err := identity.SessionsEnded(ctx, q, []gateproto.GateSession{{SessionID: id.SessionID, UserID: userID}}, s.now())
	if err != nil {
		return id, err
	}
	if len(ended) > 0 {
		return id, loginEndedError(ended[0].Reason)
	}
	return id, nil
}

// loginEndedError is the refusal of a certificate whose session ended.
func loginEndedError(reason string) *api.Error {
	msg := "this login was ended (logged out / disabled)"
	switch reason {
	case gateproto.SessionEndedExpired:
		msg = "this login has expired"
	case gateproto.SessionEndedUnknown:
		msg = "this login is not known to the server"
	}
	return api.Errorf(api.CodeForbidden, "%s; run `gpuaas login`", msg).WithHint(reloginHint)
}

// audited runs a gateway query in a transaction that also writes its audit
// row, so no credential leaves controld without a trace. These calls mint
// short-lived credentials but change no domain state, so they are queries:
// no Idempotency-Key, and a retry simply mints afresh. fn fills the entry
// even when it refuses; a refusal is then audited on its own (the
// transaction holding the attempt is rolled back).
func audited[Resp any](ctx context.Context, s *Server, c *call, fn func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*Resp, error)) (*Resp, error) {
	var resp *Resp
	err := s.auditedTx(ctx, c.request(), func(ctx context.Context, tx pgx.Tx, e *audit.Entry) error {
		var err error
		resp, err = fn(ctx, tx, e)
		return err
	})
	return resp, err
}

// auditedTx is audited for a handler that keeps its own answer (a domain's:
// volumesapi.Audited).
func (s *Server) auditedTx(ctx context.Context, r *endpoint.Request, fn func(ctx context.Context, tx pgx.Tx, e *audit.Entry) error) error {
	var e audit.Entry
	meta := audit.Meta{ActorID: r.Principal.UserID, CorrelationID: r.Corr}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := fn(ctx, tx, &e); err != nil {
			return err
		}
		meta.At = s.now()
		return audit.Write(ctx, tx, meta, e)
	})
	var apiErr *api.Error
	if err != nil && errors.As(err, &apiErr) && e.Action != "" {
		meta.At = s.now()
		e.Action += "_refused"
		e.Detail = map[string]any{"request": e.Detail, "code": apiErr.Code, "message": apiErr.Message}
		if werr := audit.Write(ctx, s.pool, meta, e); werr != nil {
			s.cfg.Log.Warn("audit refusal", "action", e.Action, "err", werr)
		}
	}
	return err
}

// registeredGateway is the live gateway identity whose key is key and
// whose name is the calling gateway's.
func (s *Server) registeredGateway(ctx context.Context, tx pgx.Tx, c *call, key ssh.PublicKey) (api.BusIdentity, error) {
	notRegistered := api.Errorf(api.CodeForbidden, "%s is not a registered gateway key", ssh.FingerprintSHA256(key)).
		WithHint("the gateway's key is its NATS key: `gpuaas ops nats-identity add --kind gateway`")
	ck, ok := key.(ssh.CryptoPublicKey)
	if !ok {
		return api.BusIdentity{}, notRegistered
	}
	ed, ok := ck.CryptoPublicKey().(ed25519.PublicKey)
	if !ok {
		return api.BusIdentity{}, notRegistered
	}
	nk, err := bus.PublicKeyNkey(ed)
	if err != nil {
		return api.BusIdentity{}, notRegistered
	}
	id, err := busauth.LiveIdentity(ctx, tx, nk)
	if err != nil || id.Kind != api.BusIdentityGateway {
		return api.BusIdentity{}, notRegistered
	}
	if c.principal.Email != id.Name+"@"+identity.ServiceDomain {
		return api.BusIdentity{}, api.Errorf(api.CodeForbidden, "%s is registered for gateway %s, not %s",
			ssh.FingerprintSHA256(key), id.Name, c.principal.Email)
	}
	return id, nil
}

func (s *Server) checkGateLogin(req gateproto.GateLoginRequest) error {
	if len(req.Nonce) < 16 {
		return api.Errorf(api.CodeInvalidArgument, "nonce must have at least 16 characters")
	}
	if d := s.now().Sub(req.IssuedAt); d > gateLoginSkew || d < -gateLoginSkew {
		return api.Errorf(api.CodeUnauthenticated, "login assertion issued at %s is not within %s of now",
			req.IssuedAt.UTC().Format(time.RFC3339), gateLoginSkew).WithHint("check the gateway's clock")
	}
	kp, err := nkeys.FromPublicKey(req.PublicKey)
	if err != nil || !api.CanonicalUserKey(req.PublicKey) {
		return api.Errorf(api.CodeInvalidArgument, "public_key is not an nkey user key")
	}
	if kp.Verify(gateproto.GateLoginMessage(req.PublicKey, req.IssuedAt, req.Nonce), req.Signature) != nil {
		return api.Errorf(api.CodeUnauthenticated, "bad signature on the login assertion")
	}
	return nil
}

// gateLoginSkew is how far a gateway's login assertion may be from now.
const gateLoginSkew = time.Minute

// GatewaySessionTTL is how long a gateway's session token lives; sshgate
// logs in again well before it ends.
const GatewaySessionTTL = 15 * time.Minute
