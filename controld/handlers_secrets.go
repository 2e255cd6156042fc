package controld

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/internal/api"
)

// secretEndpoints are project secrets' (controld/secrets, docs/jobs.md
// "Secrets"): owners and members set and remove them, viewers list their
// names; no endpoint returns a value.
func (s *Server) secretEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpSecretSet, s.secretSet),
		query(s, api.OpSecretList, s.secretList),
		mutation(s, api.OpSecretRemove, s.secretRemove),
	}
}

func (s *Server) secretSet(ctx context.Context, c *call, req api.SecretSetRequest) (work[api.Secret], error) {
	req.Name = strings.TrimSpace(req.Name)
	if err := api.CheckSecretName(req.Name); err != nil {
		return nil, err
	}
	if len(req.Value) > api.MaxSecretBytes {
		return nil, api.Errorf(api.CodeInvalidArgument, "value: %d bytes; a secret holds at most %d", len(req.Value), api.MaxSecretBytes)
	}
	if s.cfg.SecretsKey == nil {
		return nil, api.Errorf(api.CodeUnavailable, "this platform keeps no secrets: controld has no secrets key").
			WithHint("an operator starts controld with --secrets-key-file (docs/operators.md)")
	}
	ref, err := s.projectRef(ctx, c, strings.TrimSpace(req.Project))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Secret, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, c.principal.UserID, c.principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		sec, err := secrets.Set(ctx, tx, s.cfg.SecretsKey, p, req.Name, req.Value, c.principal.UserID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := secrets.Effect(ctx, tx, api.EndpointSecretSet, sec)
		return &sec, eff, err
	}, nil
}

func (s *Server) secretList(ctx context.Context, c *call, req api.SecretListRequest) (*api.SecretList, error) {
	ref, err := s.projectRef(ctx, c, strings.TrimSpace(req.Project))
	if err != nil {
		return nil, err
	}
	p, err := project.Authorize(ctx, s.pool, ref, c.principal.UserID, c.principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	list, err := secrets.List(ctx, s.pool, p.ID)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []api.Secret{}
	}
	return &api.SecretList{Project: p.Name, Secrets: list}, nil
}

func (s *Server) secretRemove(ctx context.Context, c *call, req api.SecretRemoveRequest) (work[api.Secret], error) {
	req.Name = strings.TrimSpace(req.Name)
	if err := api.CheckSecretName(req.Name); err != nil {
		return nil, err
	}
	ref, err := s.projectRef(ctx, c, strings.TrimSpace(req.Project))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Secret, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, c.principal.UserID, c.principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		sec, err := secrets.Remove(ctx, tx, p, req.Name, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := secrets.Effect(ctx, tx, api.EndpointSecretRemove, sec)
		return &sec, eff, err
	}, nil
}
