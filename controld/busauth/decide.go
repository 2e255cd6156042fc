package busauth

import (
	"context"
	"crypto/ed25519"
	"errors"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/recstore"
)

// Kinds of connection the callout lets in.
const (
	KindUser     = "user"     // a session token
	KindPreLogin = "prelogin" // an ephemeral key, before login
	KindNode     = "node"     // hostd with its enrolled key
	KindEnroll   = "enroll"   // hostd with an enrollment token
	KindGateway  = "gateway"  // sshgate with a registered key
	KindOperator = "operator" // natscli with a registered key
)

// grant is a decided connection.
type grant struct {
	kind string
	// principal is the user id, node id or key the connection acts as.
	principal string
	sessionID string
	// connKey is the nkey the connection signed in with, if any.
	connKey string
	source  string
	account string
	expires time.Time
	perms   jwt.Permissions
}

// decide maps the credentials a connection presented to an identity and
// its permissions, or refuses it.
func (s *Service) decide(ctx context.Context, req *jwt.AuthorizationRequestClaims) (*grant, error) {
	co := req.ConnectOptions
	if co.JWT != "" || co.Username != "" || co.Password != "" {
		return nil, refused("only gpuaas credentials are accepted (a session token or a registered nkey)")
	}
	src := sourceHost(req.ClientInformation)
	if co.Nkey == "" {
		if co.Token == "" {
			return nil, refused("no credentials")
		}
		return s.userGrant(ctx, co.Token, "", src)
	}
	if err := verifyNonce(co.Nkey, co.SignedNonce, req.ClientInformation.Nonce); err != nil {
		return nil, err
	}
	if g, err := s.keyGrant(ctx, co.Nkey); g != nil || err != nil {
		return withSource(g, src), err
	}
	if co.Token != "" && !node.IsEnrollToken(co.Token) {
		return s.userGrant(ctx, co.Token, co.Nkey, src)
	}
	if !s.limits.allow(src, s.now()) {
		return nil, refused("too many new connections from %s without a login; slow down", src)
	}
	if co.Token != "" {
		// The enrollment itself checks the token (and says what is wrong
		// with it); the connection may do nothing else.
		return withSource(s.enrollGrant(co.Nkey), src), nil
	}
	return withSource(s.preLoginGrant(co.Nkey), src), nil
}

func withSource(g *grant, src string) *grant {
	if g != nil {
		g.source = src
	}
	return g
}

// keyGrant lets in a registered key: a gateway or operator identity, or an
// enrolled node. It returns nil, nil for an unknown key.
func (s *Service) keyGrant(ctx context.Context, key string) (*grant, error) {
	id, err := identityByKey(ctx, s.cfg.Pool, key)
	if err != nil {
		return nil, err
	}
	if id != nil && id.RevokedAt != nil {
		return nil, refused("key %s was revoked at %s", key, id.RevokedAt.Format(time.RFC3339))
	}
	if id != nil {
		switch id.Kind {
		case api.BusIdentityGateway:
			return s.gatewayGrant(key), nil
		case api.BusIdentityOperator:
			return s.operatorGrant(key), nil
		}
	}
	raw, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(key))
	if err != nil {
		return nil, refused("malformed nkey")
	}
	nodeID, err := node.ByPublicKey(ctx, s.cfg.Pool, ed25519.PublicKey(raw))
	if err != nil || nodeID == "" {
		return nil, err
	}
	return s.nodeGrant(nodeID, key), nil
}

func (s *Service) userGrant(ctx context.Context, token, key, src string) (*grant, error) {
	p, err := s.cfg.Identity.Authenticate(ctx, s.cfg.Pool, "Bearer "+token)
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		return nil, refused("session refused: %s", apiErr.Message)
	}
	if err != nil {
		return nil, err
	}
	if p.IsGateway() {
		return nil, refused("service principals connect with their nkey, not a token")
	}
	g := &grant{kind: KindUser, principal: p.UserID, sessionID: p.SessionID, connKey: key, source: src,
		account: bus.AppAccount, expires: p.ExpiresAt}
	g.perms.Pub.Allow.Add(api.SubjectPrefix + ".>")
	g.perms.Sub.Allow.Add(api.UserInboxPrefix(p.UserID)+".>", "gpuaas.user."+p.UserID+".>")
	return g, nil
}

// preLoginGrant lets a client that has not logged in (or whose session
// ended) call the API and read replies on its own inbox only, named after
// the key it proved it holds, so no other connection can read its
// password's reply. The API tells it what it may do: each request is
// authenticated by its bearer token, so without one only the public
// endpoints (auth.config, auth.login, ...) answer, and a stale one gets
// "your session has expired" rather than silence.
func (s *Service) preLoginGrant(key string) *grant {
	g := &grant{kind: KindPreLogin, principal: key, connKey: key, account: bus.AppAccount,
		expires: s.now().Add(time.Hour)}
	g.perms.Pub.Allow.Add(api.SubjectPrefix + ".>")
	g.perms.Sub.Allow.Add(api.InboxPrefix(key) + ".>")
	return g
}

func (s *Service) enrollGrant(key string) *grant {
	g := &grant{kind: KindEnroll, principal: key, connKey: key, account: bus.AppAccount,
		expires: s.now().Add(node.EnrollTokenTTL)}
	g.perms.Pub.Allow.Add(hostproto.SubjectEnroll)
	g.perms.Sub.Allow.Add(api.InboxPrefix(key) + ".>")
	return g
}

// nodeGrant lets hostd of one node receive its tasks, answer them, and
// report on its own subjects.
func (s *Service) nodeGrant(nodeID, key string) *grant {
	g := &grant{kind: KindNode, principal: nodeID, connKey: key, account: bus.AppAccount,
		expires: s.now().Add(s.cfg.ServiceTTL)}
	g.perms.Pub.Allow.Add(hostproto.NodeReportsPermission(nodeID))
	g.perms.Sub.Allow.Add(hostproto.NodeSubscribePermission(nodeID), api.InboxPrefix(nodeID)+".>")
	// Replies to controld's task deliveries go to controld's inbox.
	g.perms.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	return g
}

// gatewayGrant lets sshgate call the API (as itself and for users with
// delegated sessions), follow users' events for the TUI it serves, hear
// revocations, and write the chunks of terminal recordings.
func (s *Service) gatewayGrant(key string) *grant {
	g := &grant{kind: KindGateway, principal: key, connKey: key, account: bus.AppAccount,
		expires: s.now().Add(s.cfg.ServiceTTL)}
	g.perms.Pub.Allow.Add(api.SubjectPrefix + ".>")
	// Chunks of recordings, never their metadata: controld seals them
	// (internal/recstore), and nothing can be replaced or deleted there.
	g.perms.Pub.Allow.Add(recstore.WriterSubjects...)
	g.perms.Sub.Allow.Add(api.InboxPrefix(key)+".>", "gpuaas.gate.>", "gpuaas.user.*.>")
	return g
}

// operatorGrant lets natscli monitor the servers read-only from the system
// account: server and account information, no kicks, reloads or
// lame-duck mode; and the micro services' ping, info and statistics
// (`nats micro stats gpuaas`), which the app account exports to the
// system account (bus.ServerAuth.Config): read-only too, micro has no
// other verbs.
func (s *Service) operatorGrant(key string) *grant {
	g := &grant{kind: KindOperator, principal: key, connKey: key, account: bus.SystemAccount,
		expires: s.now().Add(s.cfg.ServiceTTL)}
	g.perms.Pub.Allow.Add("$SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING.*", "$SYS.REQ.SERVER.*.*",
		"$SYS.REQ.ACCOUNT.*.*",
		"$SRV.PING", "$SRV.PING.>", "$SRV.INFO", "$SRV.INFO.>", "$SRV.STATS", "$SRV.STATS.>")
	g.perms.Pub.Deny.Add("$SYS.REQ.SERVER.*.KICK", "$SYS.REQ.SERVER.*.LDM", "$SYS.REQ.SERVER.*.RELOAD",
		"$SYS.REQ.SERVER.PING.KICK", "$SYS.REQ.SERVER.PING.LDM", "$SYS.REQ.SERVER.PING.RELOAD")
	g.perms.Sub.Allow.Add("_INBOX.>", "$SYS.SERVER.>", "$SYS.ACCOUNT.>")
	return g
}
