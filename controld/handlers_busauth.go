package controld

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// busEndpoints are the keys registered on the bus (controld/busauth).
func (s *Server) busEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpBusIdentityAdd, s.busIdentityAdd),
		query(s, api.OpBusIdentityList, s.busIdentityList),
		mutation(s, api.OpBusIdentityRevoke, s.busIdentityRevoke),
	}
}

func (s *Server) busIdentityAdd(_ context.Context, c *call, req api.BusIdentityAddRequest) (work[api.BusIdentity], error) {
	if err := busauth.ValidateIdentity(req); err != nil {
		return nil, err
	}
	return s.addBusIdentity(req, c.principal.UserID), nil
}

func (s *Server) addBusIdentity(req api.BusIdentityAddRequest, actorID string) work[api.BusIdentity] {
	return func(ctx context.Context, tx pgx.Tx) (*api.BusIdentity, mutate.Effect, error) {
		id, err := busauth.AddIdentity(ctx, tx, req, actorID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &id, mutate.Effect{Audit: audit.Entry{Action: api.EndpointBusIdentityAdd, TargetType: "bus_identity",
			TargetID: id.PublicKey, Detail: map[string]string{"kind": id.Kind, "name": id.Name}},
			Events: []outbox.Event{{Kind: api.EventBusIdentity, Subject: id.PublicKey, Users: []string{actorID}, Payload: id}}}, nil
	}
}

func (s *Server) busIdentityList(ctx context.Context, _ *call, _ api.Empty) (*[]api.BusIdentity, error) {
	ids, err := busauth.ListIdentities(ctx, s.pool)
	if ids == nil {
		ids = []api.BusIdentity{}
	}
	return &ids, err
}

// busIdentityRevoke revokes keys; the event it emits has controld close
// every connection they hold (they could not reconnect anyway).
func (s *Server) busIdentityRevoke(_ context.Context, c *call, req api.BusIdentityRevokeRequest) (work[api.BusIdentityRevokeResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.BusIdentityRevokeResponse, mutate.Effect, error) {
		revoked, err := busauth.RevokeIdentities(ctx, tx, req, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		keys := make([]string, len(revoked))
		for i, id := range revoked {
			keys[i] = id.PublicKey
		}
		return &api.BusIdentityRevokeResponse{Revoked: revoked}, mutate.Effect{
			Audit: audit.Entry{Action: api.EndpointBusIdentityRevoke, TargetType: "bus_identity",
				TargetID: keys[0], Detail: map[string]any{"keys": keys}},
			Events: []outbox.Event{{Kind: api.EventBusIdentityRevoked, Subject: keys[0], Users: []string{c.principal.UserID},
				Payload: api.BusIdentityRevokeResponse{Revoked: revoked}}},
		}, nil
	}, nil
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
		Key: api.NewIdempotencyKey(), Fingerprint: []byte(req.PublicKey)}, s.addBusIdentity(req, actorID).Untyped())
	if err != nil {
		return api.BusIdentity{}, err
	}
	var id api.BusIdentity
	return id, json.Unmarshal(body, &id)
}
