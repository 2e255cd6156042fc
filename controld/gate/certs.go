package gate

import (
	"context"
	"crypto/ed25519"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

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

// parseCert reads the certificate a gateway request carries.
func parseCert(line string) (ssh.PublicKey, error) {
	if line == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "certificate is required")
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "certificate is not an SSH certificate: %v", err)
	}
	return key, nil
}

// verifyCert checks that key is a user certificate of the user CA for
// userID, valid now, whose login session is live, and returns what it
// says. Every refusal is forbidden: the gateway asking is authenticated,
// the certificate it was shown is what does not count.
func (h handlers) verifyCert(ctx context.Context, q store.Querier, key ssh.PublicKey, userID string) (sshcert.Identity, error) {
	uca, err := h.CAs.Authority(ctx, q, api.CAUser)
	if err != nil {
		return sshcert.Identity{}, err
	}
	id, err := sshcert.VerifyUser(uca.Trusted(), key, userID, h.Now())
	if err != nil {
		return sshcert.Identity{}, api.Errorf(api.CodeForbidden, "the certificate does not prove %s: %v", userID, err)
	}
	if id.SessionID == "" {
		return id, api.Errorf(api.CodeForbidden, "this SSH certificate names no login session (it was issued before logins were tied to certificates); run `gpuaas login`").
			WithHint(reloginHint)
	}
	ended, err := identity.SessionsEnded(ctx, q, []gateproto.GateSession{{SessionID: id.SessionID, UserID: userID}}, h.Now())
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

// registeredGateway is the live gateway identity whose key is key and
// whose name is the calling gateway's.
func registeredGateway(ctx context.Context, tx pgx.Tx, r *endpoint.Request, key ssh.PublicKey) (api.BusIdentity, error) {
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
	if r.Principal.Email != id.Name+"@"+identity.ServiceDomain {
		return api.BusIdentity{}, api.Errorf(api.CodeForbidden, "%s is registered for gateway %s, not %s",
			ssh.FingerprintSHA256(key), id.Name, r.Principal.Email)
	}
	return id, nil
}
