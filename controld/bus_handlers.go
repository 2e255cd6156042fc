package controld

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GatewaySessionTTL is how long a gateway's session token lives; sshgate
// logs in again well before it ends.
const GatewaySessionTTL = 15 * time.Minute

// gateLoginSkew is how far a gateway's login assertion may be from now.
const gateLoginSkew = time.Minute

func (s *Server) busEndpoints() []endpointDef {
	return []endpointDef{
		{api.EndpointBusIdentityAdd, s.mutation(api.EndpointBusIdentityAdd, adminOnly, s.busIdentityAdd)},
		{api.EndpointBusIdentityList, s.query(api.EndpointBusIdentityList, adminOnly, s.busIdentityList)},
		{api.EndpointBusIdentityRevoke, s.mutation(api.EndpointBusIdentityRevoke, adminOnly, s.busIdentityRevoke)},
		{api.EndpointGateLogin, s.gateLogin()},
	}
}

func (s *Server) busIdentityAdd(_ context.Context, c *call) (mutate.Func, error) {
	var req api.BusIdentityAddRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if err := busauth.ValidateIdentity(req); err != nil {
		return nil, err
	}
	return s.addBusIdentity(req, c.principal.UserID), nil
}

func (s *Server) addBusIdentity(req api.BusIdentityAddRequest, actorID string) mutate.Func {
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		id, err := busauth.AddIdentity(ctx, tx, req, actorID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return id, mutate.Effect{Audit: audit.Entry{Action: api.EndpointBusIdentityAdd, TargetType: "bus_identity",
			TargetID: id.PublicKey, Detail: map[string]string{"kind": id.Kind, "name": id.Name}},
			Events: []outbox.Event{{Kind: api.EventBusIdentity, Subject: id.PublicKey, Users: []string{actorID}, Payload: id}}}, nil
	}
}

func (s *Server) busIdentityList(ctx context.Context, _ *call) (any, error) {
	ids, err := busauth.ListIdentities(ctx, s.pool)
	if ids == nil {
		ids = []api.BusIdentity{}
	}
	return ids, err
}

// busIdentityRevoke revokes keys; the event it emits has controld close
// every connection they hold (they could not reconnect anyway).
func (s *Server) busIdentityRevoke(_ context.Context, c *call) (mutate.Func, error) {
	var req api.BusIdentityRevokeRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		revoked, err := busauth.RevokeIdentities(ctx, tx, req, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		keys := make([]string, len(revoked))
		for i, id := range revoked {
			keys[i] = id.PublicKey
		}
		return api.BusIdentityRevokeResponse{Revoked: revoked}, mutate.Effect{
			Audit: audit.Entry{Action: api.EndpointBusIdentityRevoke, TargetType: "bus_identity",
				TargetID: keys[0], Detail: map[string]any{"keys": keys}},
			Events: []outbox.Event{{Kind: api.EventBusIdentityRevoked, Subject: keys[0], Users: []string{c.principal.UserID},
				Payload: api.BusIdentityRevokeResponse{Revoked: revoked}}},
		}, nil
	}, nil
}

// gateLogin gives a registered gateway a short-lived session token for an
// assertion signed with its key, so sshgate never holds a long-lived
// token: its seed stays on its machine and each token lives
// GatewaySessionTTL.
func (s *Server) gateLogin() micro.Handler {
	return s.endpoint(api.EndpointGateLogin, public, func(ctx context.Context, c *call) ([]byte, error) {
		var req api.GateLoginRequest
		if err := c.decode(&req); err != nil {
			return nil, err
		}
		if err := s.checkGateLogin(req); err != nil {
			return nil, err
		}
		key := c.req.Headers().Get(api.HeaderIdempotencyKey)
		return s.mut.Run(ctx, mutate.Request{Endpoint: api.EndpointGateLogin, ActorID: "gateway:" + req.PublicKey,
			Key: key, CorrelationID: c.corr, Fingerprint: c.req.Data(), NoReplay: true},
			func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
				id, err := busauth.LiveIdentity(ctx, tx, req.PublicKey)
				if err != nil || id.Kind != api.BusIdentityGateway {
					return nil, mutate.Effect{}, api.Errorf(api.CodeUnauthenticated, "%s is not a registered gateway key", req.PublicKey).
						WithHint("register it: `gpuaas ops nats-identity add --kind gateway`")
				}
				u, err := s.identity.EnsureServicePrincipal(ctx, tx, id.Name, api.RoleGateway)
				if err != nil {
					return nil, mutate.Effect{}, err
				}
				resp, err := s.identity.ServiceSession(ctx, tx, u, GatewaySessionTTL)
				if err != nil {
					return nil, mutate.Effect{}, err
				}
				return resp, mutate.Effect{Audit: audit.Entry{Action: api.EndpointGateLogin, TargetType: "session",
					TargetID: resp.SessionID, Detail: map[string]string{"key": req.PublicKey, "user_id": u.ID}}}, nil
			})
	})
}

func (s *Server) checkGateLogin(req api.GateLoginRequest) error {
	if len(req.Nonce) < 16 {
		return api.Errorf(api.CodeInvalidArgument, "nonce must have at least 16 characters")
	}
	if d := s.now().Sub(req.IssuedAt); d > gateLoginSkew || d < -gateLoginSkew {
		return api.Errorf(api.CodeUnauthenticated, "login assertion issued at %s is not within %s of now",
			req.IssuedAt.UTC().Format(time.RFC3339), gateLoginSkew).WithHint("check the gateway's clock")
	}
	kp, err := nkeys.FromPublicKey(req.PublicKey)
	if err != nil || !nkeys.IsValidPublicUserKey(req.PublicKey) {
		return api.Errorf(api.CodeInvalidArgument, "public_key is not an nkey user key")
	}
	if kp.Verify(api.GateLoginMessage(req.PublicKey, req.IssuedAt, req.Nonce), req.Signature) != nil {
		return api.Errorf(api.CodeUnauthenticated, "bad signature on the login assertion")
	}
	return nil
}

// EnsureBusIdentity registers a key on behalf of actorID unless it is
// registered already, as `gpuaas ops nats-identity add` does (for
// `gpuaas dev`, which runs sshgate in-process, and tests).
func (s *Server) EnsureBusIdentity(ctx context.Context, req api.BusIdentityAddRequest, actorID string) (api.BusIdentity, error) {
	if id, err := busauth.LiveIdentity(ctx, s.pool, req.PublicKey); err == nil {
		return id, nil
	}
	if err := busauth.ValidateIdentity(req); err != nil {
		return api.BusIdentity{}, err
	}
	body, err := s.mut.Run(ctx, mutate.Request{Endpoint: api.EndpointBusIdentityAdd, ActorID: actorID,
		Key: api.NewIdempotencyKey(), Fingerprint: []byte(req.PublicKey)}, s.addBusIdentity(req, actorID))
	if err != nil {
		return api.BusIdentity{}, err
	}
	var id api.BusIdentity
	return id, json.Unmarshal(body, &id)
}
