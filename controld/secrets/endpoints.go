package secrets

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Deps are what secrets' endpoints need of the server.
type Deps struct {
	// DB serves the reads outside a mutation's transaction.
	DB store.Querier
	// Key seals the values; nil when controld was started without
	// --secrets-key-file (secret.set is then refused).
	Key *Key
	Now func() time.Time
}

// Endpoints are project secrets' (docs/jobs.md "Secrets",
// docs/decisions/0069-domain-endpoints.md): owners and members set and
// remove them, viewers list their names; no endpoint returns a value.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpSecretSet, h.set),
		endpoint.Query(api.OpSecretList, h.list),
		endpoint.Mutation(api.OpSecretRemove, h.remove),
	}
}

type handlers struct{ Deps }

func (h handlers) set(ctx context.Context, r *endpoint.Request, req api.SecretSetRequest) (endpoint.Work[api.Secret], error) {
	req.Name = strings.TrimSpace(req.Name)
	if err := api.CheckSecretName(req.Name); err != nil {
		return nil, err
	}
	if len(req.Value) > api.MaxSecretBytes {
		return nil, api.Errorf(api.CodeInvalidArgument, "value: %d bytes; a secret holds at most %d", len(req.Value), api.MaxSecretBytes)
	}
	if h.Key == nil {
		return nil, api.Errorf(api.CodeUnavailable, "this platform keeps no secrets: controld has no secrets key").
			WithHint("an operator starts controld with --secrets-key-file (docs/operators.md)")
	}
	ref, err := project.Ref(ctx, h.DB, r, strings.TrimSpace(req.Project))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Secret, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		sec, err := Set(ctx, tx, h.Key, p, req.Name, req.Value, r.Principal.UserID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := Effect(ctx, tx, api.EndpointSecretSet, sec)
		return &sec, eff, err
	}, nil
}

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.SecretListRequest) (*api.SecretList, error) {
	ref, err := project.Ref(ctx, h.DB, r, strings.TrimSpace(req.Project))
	if err != nil {
		return nil, err
	}
	p, err := project.Authorize(ctx, h.DB, ref, r.Principal.UserID, r.Principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	list, err := List(ctx, h.DB, p.ID)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []api.Secret{}
	}
	return &api.SecretList{Project: p.Name, Secrets: list}, nil
}

func (h handlers) remove(ctx context.Context, r *endpoint.Request, req api.SecretRemoveRequest) (endpoint.Work[api.Secret], error) {
	req.Name = strings.TrimSpace(req.Name)
	if err := api.CheckSecretName(req.Name); err != nil {
		return nil, err
	}
	ref, err := project.Ref(ctx, h.DB, r, strings.TrimSpace(req.Project))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Secret, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		sec, err := Remove(ctx, tx, p, req.Name, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := Effect(ctx, tx, api.EndpointSecretRemove, sec)
		return &sec, eff, err
	}, nil
}
