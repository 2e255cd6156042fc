package controld

import (
	"context"
	"fmt"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// Revocation at the gateway. A user certificate names the login session
// it was minted under (sshcert.ExtensionSessionID). controld honours a
// certificate for the gateway — a ticket to a node (gate.authorize), a
// delegated session for commands over SSH (gate.user_token) — only while
// that session is live: not logged out, not disabled, not expired. The
// gateway also asks, in one batch, about the sessions of its open
// connections (gate.sessions), and is told at once of revocations on
// api.GateRevokedSubject (see outbox.Fanout).

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
	ended, err := identity.SessionsEnded(ctx, q, []api.GateSession{{SessionID: id.SessionID, UserID: userID}}, s.now())
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
	case api.SessionEndedExpired:
		msg = "this login has expired"
	case api.SessionEndedUnknown:
		msg = "this login is not known to the server"
	}
	return api.Errorf(api.CodeForbidden, "%s; run `gpuaas login`", msg).WithHint(reloginHint)
}

// gateSessions answers which of the gateway's sessions have ended. It is a
// plain read, not audited: the gateway asks every half minute, and
// nothing is minted.
func (s *Server) gateSessions(ctx context.Context, c *call) (any, error) {
	var req api.GateSessionsRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if len(req.Sessions) > api.MaxGateSessions {
		return nil, api.Errorf(api.CodeInvalidArgument, "%d sessions in one request; at most %d", len(req.Sessions), api.MaxGateSessions)
	}
	for i, r := range req.Sessions {
		if r.SessionID == "" || r.UserID == "" {
			return nil, api.Errorf(api.CodeInvalidArgument, "sessions[%d]: session_id and user_id are required", i)
		}
	}
	ended, err := identity.SessionsEnded(ctx, s.pool, req.Sessions, s.now())
	if err != nil {
		return nil, fmt.Errorf("gate sessions: %w", err)
	}
	if ended == nil {
		ended = []api.GateSessionEnded{}
	}
	return api.GateSessionsResponse{Ended: ended}, nil
}
