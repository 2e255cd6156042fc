// Package tokenapi declares the endpoints of tokens for machines
// (docs/tokens.md, docs/decisions/0069-domain-endpoints.md). It is not
// part of controld/identity, which keeps the tokens: controld/endpoint
// and controld/project import identity.
package tokenapi

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Deps are what tokens' endpoints need of the server.
type Deps struct {
	// DB serves the reads outside a mutation's transaction.
	DB store.Querier
	// IDs keeps the tokens, and drops a revoked one from its cache.
	IDs *identity.Service
	// Delegated is the server's refusal of a session delegated through
	// the SSH gateway, which creates no token.
	Delegated error
	Now       func() time.Time
}

// Endpoints are tokens for machines: a project's owners create, list and
// revoke them.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpTokenCreate, h.create),
		endpoint.Query(api.OpTokenList, h.list),
		endpoint.Mutation(api.OpTokenRevoke, h.revoke),
	}
}

type handlers struct{ Deps }

// projectOf is the project a token request names: its body's, else the
// request's (project.Ref).
func (h handlers) projectOf(ctx context.Context, r *endpoint.Request, named string) (string, error) {
	return project.Ref(ctx, h.DB, r, strings.TrimSpace(named))
}

func (h handlers) create(ctx context.Context, r *endpoint.Request, req api.TokenCreateRequest) (endpoint.Work[api.TokenCreateResponse], error) {
	if r.Principal.Delegated {
		return nil, h.Delegated
	}
	req.Name = strings.TrimSpace(req.Name)
	if err := api.CheckTokenName(req.Name); err != nil {
		return nil, err
	}
	if req.Role != api.ProjectMember && req.Role != api.ProjectViewer {
		return nil, api.Errorf(api.CodeInvalidArgument, "role %q: a token is a member or a viewer of its project", req.Role).
			WithHint("pass --role member or --role viewer")
	}
	ttl, err := api.ParseTokenTTL(req.TTL)
	if err != nil {
		return nil, err
	}
	ref, err := h.projectOf(ctx, r, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.TokenCreateResponse, mutate.Effect, error) {
		// Owners (and admins) only: a token reaches what its project's
		// owner could grant a person.
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		tok, secret, err := h.IDs.CreateMachineToken(ctx, tx, identity.NewMachineToken{Name: req.Name,
			ProjectID: p.ID, Role: req.Role, TTL: ttl, CreatedBy: r.Principal.UserID})
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := project.SetMember(ctx, tx, p.ID, tok.ID, tok.Role, h.Now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		return &api.TokenCreateResponse{Token: tok, Secret: secret}, tokenEffect(api.EndpointTokenCreate, tok,
			outbox.Event{Kind: api.EventToken, Subject: tok.ID, ProjectID: tok.ProjectID,
				Users: []string{tok.CreatedBy}, Payload: tok}), nil
	}, nil
}

// tokenEffect audits a token change (never its secret) with its event.
func tokenEffect(action string, tok api.Token, ev outbox.Event) mutate.Effect {
	return mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "token", TargetID: tok.ID, ProjectID: tok.ProjectID,
			Detail: map[string]any{"name": tok.Name, "role": tok.Role, "expires_at": tok.ExpiresAt}},
		Events: []outbox.Event{ev},
	}
}

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.TokenListRequest) (*api.TokenListResponse, error) {
	ref, err := h.projectOf(ctx, r, req.Project)
	if err != nil {
		return nil, err
	}
	p, err := project.Authorize(ctx, h.DB, ref, r.Principal.UserID, r.Principal.Role, project.AccessAdmin)
	if err != nil {
		return nil, err
	}
	list, err := h.IDs.MachineTokens(ctx, h.DB, p.ID, req.All)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []api.Token{}
	}
	return &api.TokenListResponse{Tokens: list}, nil
}

func (h handlers) revoke(ctx context.Context, r *endpoint.Request, req api.TokenRevokeRequest) (endpoint.Work[api.Token], error) {
	req.Token = strings.TrimSpace(req.Token)
	if req.Token == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which token? name it by id or name").WithHint("see `gpuaas token list`")
	}
	ref := ""
	if !strings.HasPrefix(req.Token, api.TokenIDPrefix) {
		var err error
		if ref, err = h.projectOf(ctx, r, req.Project); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Token, mutate.Effect, error) {
		tok, err := h.find(ctx, tx, r, ref, req.Token)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		// Dropped from this replica's cache now; the others hear it at
		// commit (identity.RunRevocations).
		h.IDs.Revoking(tok.ID)
		tok, err = h.IDs.RevokeMachineToken(ctx, tx, tok.ID, r.Principal.UserID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		// session.revoked closes the token's NATS connections (busauth)
		// and tells its creator.
		return &tok, tokenEffect(api.EndpointTokenRevoke, tok, outbox.Event{Kind: api.EventSessionRevoked,
			Subject: tok.ID, ProjectID: tok.ProjectID, Users: []string{tok.CreatedBy, tok.ID},
			Payload: api.SessionRevoked{UserID: tok.ID, SessionIDs: []string{tok.ID}, Reason: "token revoked"}}), nil
	}, nil
}

// find resolves a token by id (ref empty) or by name in project ref,
// and checks the caller owns its project (or is an admin). A token of a
// project the caller cannot see is "not found", as the project is.
func (h handlers) find(ctx context.Context, tx pgx.Tx, r *endpoint.Request, ref, token string) (api.Token, error) {
	var tok api.Token
	if ref == "" {
		var err error
		if tok, err = h.IDs.MachineToken(ctx, tx, token); err != nil {
			return tok, err
		}
		ref = tok.ProjectID
	}
	p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessAdmin)
	if err != nil {
		if tok.ID != "" && api.CodeOf(err) == api.CodeNotFound {
			return api.Token{}, api.Errorf(api.CodeNotFound, "token %q not found", token).WithHint("see `gpuaas token list`")
		}
		return api.Token{}, err
	}
	if tok.ID == "" {
		return h.IDs.MachineTokenByName(ctx, tx, p.ID, token)
	}
	return tok, nil
}
