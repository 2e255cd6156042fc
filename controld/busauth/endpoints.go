package busauth

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Deps are what the endpoints of the keys registered on the bus need of
// the server (docs/decisions/0069-domain-endpoints.md).
type Deps struct {
	DB  store.Querier
	Now func() time.Time
}

// Endpoints are the keys registered on the bus: `gpuaas ops
// nats-identity add`, list and revoke.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpBusIdentityAdd, h.add),
		endpoint.Query(api.OpBusIdentityList, h.list),
		endpoint.Mutation(api.OpBusIdentityRevoke, h.revoke),
	}
}

type handlers struct{ Deps }

func (h handlers) add(_ context.Context, r *endpoint.Request, req api.BusIdentityAddRequest) (endpoint.Work[api.BusIdentity], error) {
	if err := ValidateIdentity(req); err != nil {
		return nil, err
	}
	return addWork(req, r.Principal.UserID, h.Now), nil
}

// addWork registers req's key on behalf of actorID, with its audit row
// and event.
func addWork(req api.BusIdentityAddRequest, actorID string, now func() time.Time) endpoint.Work[api.BusIdentity] {
	return func(ctx context.Context, tx pgx.Tx) (*api.BusIdentity, mutate.Effect, error) {
		id, err := AddIdentity(ctx, tx, req, actorID, now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &id, mutate.Effect{Audit: audit.Entry{Action: api.EndpointBusIdentityAdd, TargetType: "bus_identity",
			TargetID: id.PublicKey, Detail: map[string]string{"kind": id.Kind, "name": id.Name}},
			Events: []outbox.Event{{Kind: api.EventBusIdentity, Subject: id.PublicKey, Users: []string{actorID}, Payload: id}}}, nil
	}
}

func (h handlers) list(ctx context.Context, _ *endpoint.Request, _ api.Empty) (*[]api.BusIdentity, error) {
	ids, err := ListIdentities(ctx, h.DB)
	if ids == nil {
		ids = []api.BusIdentity{}
	}
	return &ids, err
}

// revoke revokes keys; the event it emits has controld close every
// connection they hold (they could not reconnect anyway).
func (h handlers) revoke(_ context.Context, r *endpoint.Request, req api.BusIdentityRevokeRequest) (endpoint.Work[api.BusIdentityRevokeResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.BusIdentityRevokeResponse, mutate.Effect, error) {
		revoked, err := RevokeIdentities(ctx, tx, req, h.Now())
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
			Events: []outbox.Event{{Kind: api.EventBusIdentityRevoked, Subject: keys[0], Users: []string{r.Principal.UserID},
				Payload: api.BusIdentityRevokeResponse{Revoked: revoked}}},
		}, nil
	}, nil
}

// EnsureIdentity registers a key on behalf of actorID unless it is
// registered already, through run as bus.identity.add would (audit row,
// event, idempotency record); controld's EnsureBusIdentity.
func EnsureIdentity(ctx context.Context, db store.Querier, run *mutate.Runner, req api.BusIdentityAddRequest,
	actorID string, now func() time.Time) (api.BusIdentity, error) {
	if id, err := LiveIdentity(ctx, db, req.PublicKey); err == nil {
		return id, nil
	}
	if err := ValidateIdentity(req); err != nil {
		return api.BusIdentity{}, err
	}
	body, err := run.Run(ctx, mutate.Request{Endpoint: api.EndpointBusIdentityAdd, ActorID: actorID,
		Key: api.NewIdempotencyKey(), Fingerprint: []byte(req.PublicKey)}, addWork(req, actorID, now).Untyped())
	if err != nil {
		return api.BusIdentity{}, err
	}
	var id api.BusIdentity
	return id, json.Unmarshal(body, &id)
}
