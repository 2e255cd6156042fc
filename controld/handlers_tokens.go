package controld

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// tokensEndpoints are tokens for machines (controld/identity,
// docs/tokens.md).
func (s *Server) tokensEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpTokenCreate, s.tokenCreate),
		query(s, api.OpTokenList, s.tokenList),
		mutation(s, api.OpTokenRevoke, s.tokenRevoke),
	}
}

// tokenEndpoints are what a token may call: a project's work, read or
// done with the token's project role. Everything else — credentials
// (tokens, SSH certificates, logins), project administration, money,
// operator and admin endpoints — is refused before its handler runs, so
// an endpoint added later is refused to tokens until it is listed here.
var tokenEndpoints = map[string]bool{
	api.EndpointAuthWhoami:       true,
	api.EndpointCatalogList:      true,
	api.EndpointSSHCAs:           true,
	api.EndpointEventsSince:      true,
	api.EndpointProjectList:      true,
	api.EndpointProjectMembers:   true,
	api.EndpointAllocCreate:      true,
	api.EndpointAllocGet:         true,
	api.EndpointAllocList:        true,
	api.EndpointAllocQuote:       true,
	api.EndpointAllocRelease:     true,
	api.EndpointAllocTop:         true,
	api.EndpointBillingBalance:   true,
	api.EndpointBillingLedger:    true,
	api.EndpointBillingUsage:     true,
	api.EndpointBillingBudgetGet: true,
	api.EndpointSessionList:      true,
	api.EndpointSessionGet:       true,
	// A pipeline's work: jobs, volumes, images to publish and check,
	// webhooks to read (adding one is a project owner's: tokens never are).
	api.EndpointJobCreate:         true,
	api.EndpointJobGet:            true,
	api.EndpointJobList:           true,
	api.EndpointJobCancel:         true,
	api.EndpointJobLogs:           true,
	api.EndpointSecretList:        true, // names only: a pipeline checks what its jobs name
	api.EndpointVolumeCreate:      true,
	api.EndpointVolumeGet:         true,
	api.EndpointVolumeList:        true,
	api.EndpointVolumeResize:      true,
	api.EndpointVolumeRemove:      true,
	api.EndpointVolumeAttach:      true,
	api.EndpointVolumeDetach:      true,
	api.EndpointVolumeQuote:       true,
	api.EndpointImageList:         true,
	api.EndpointImageGet:          true,
	api.EndpointImageRegistry:     true,
	api.EndpointImagePublish:      true,
	api.EndpointImageVerify:       true,
	api.EndpointWebhookList:       true,
	api.EndpointWebhookDeliveries: true,
	// Apps: a pipeline runs and follows its project's workloads.
	api.EndpointAppRun:  true,
	api.EndpointAppPs:   true,
	api.EndpointAppGet:  true,
	api.EndpointAppStop: true,
	api.EndpointAppRm:   true,
	api.EndpointAppLogs: true,
	// A pipeline serves a port it started (a model server under test).
	api.EndpointExposeCreate: true,
	api.EndpointExposeList:   true,
	api.EndpointExposeRemove: true,
}

// errTokenRefused refuses a token what only a person's session may do.
func errTokenRefused(name string) error {
	return api.Errorf(api.CodeForbidden, "a token cannot call %s: tokens work in their project only", name).
		WithHint("run `gpuaas login` and use your own session for this")
}

// tokenRefused reports whether p, a token, is refused endpoint name.
func tokenRefused(p *identity.Principal, name string) error {
	if p == nil || p.TokenID == "" || tokenEndpoints[name] {
		return nil
	}
	return errTokenRefused(name)
}

// tokenProject is the project a token request names: its body's, else
// the request's (projectRef).
func (s *Server) tokenProject(ctx context.Context, c *call, named string) (string, error) {
	return s.projectRef(ctx, c, strings.TrimSpace(named))
}

func (s *Server) tokenCreate(ctx context.Context, c *call, req api.TokenCreateRequest) (work[api.TokenCreateResponse], error) {
	if c.principal.Delegated {
		return nil, errDelegated
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
	ref, err := s.tokenProject(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.TokenCreateResponse, mutate.Effect, error) {
		// Owners (and admins) only: a token reaches what its project's
		// owner could grant a person.
		p, err := project.Authorize(ctx, tx, ref, c.principal.UserID, c.principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		tok, secret, err := s.identity.CreateMachineToken(ctx, tx, identity.NewMachineToken{Name: req.Name,
			ProjectID: p.ID, Role: req.Role, TTL: ttl, CreatedBy: c.principal.UserID})
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := project.SetMember(ctx, tx, p.ID, tok.ID, tok.Role, s.now()); err != nil {
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

func (s *Server) tokenList(ctx context.Context, c *call, req api.TokenListRequest) (*api.TokenListResponse, error) {
	ref, err := s.tokenProject(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	p, err := project.Authorize(ctx, s.pool, ref, c.principal.UserID, c.principal.Role, project.AccessAdmin)
	if err != nil {
		return nil, err
	}
	list, err := s.identity.MachineTokens(ctx, s.pool, p.ID, req.All)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []api.Token{}
	}
	return &api.TokenListResponse{Tokens: list}, nil
}

func (s *Server) tokenRevoke(ctx context.Context, c *call, req api.TokenRevokeRequest) (work[api.Token], error) {
	req.Token = strings.TrimSpace(req.Token)
	if req.Token == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which token? name it by id or name").WithHint("see `gpuaas token list`")
	}
	ref := ""
	if !strings.HasPrefix(req.Token, api.TokenIDPrefix) {
		var err error
		if ref, err = s.tokenProject(ctx, c, req.Project); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Token, mutate.Effect, error) {
		tok, err := s.findToken(ctx, tx, c, ref, req.Token)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		// Dropped from this replica's cache now; the others hear it at
		// commit (identity.RunRevocations).
		s.identity.Revoking(tok.ID)
		tok, err = s.identity.RevokeMachineToken(ctx, tx, tok.ID, c.principal.UserID, s.now())
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

// findToken resolves a token by id (ref empty) or by name in project ref,
// and checks the caller owns its project (or is an admin). A token of a
// project the caller cannot see is "not found", as the project is.
func (s *Server) findToken(ctx context.Context, tx pgx.Tx, c *call, ref, token string) (api.Token, error) {
	var tok api.Token
	if ref == "" {
		var err error
		if tok, err = s.identity.MachineToken(ctx, tx, token); err != nil {
			return tok, err
		}
		ref = tok.ProjectID
	}
	p, err := project.Authorize(ctx, tx, ref, c.principal.UserID, c.principal.Role, project.AccessAdmin)
	if err != nil {
		if tok.ID != "" && api.CodeOf(err) == api.CodeNotFound {
			return api.Token{}, api.Errorf(api.CodeNotFound, "token %q not found", token).WithHint("see `gpuaas token list`")
		}
		return api.Token{}, err
	}
	if tok.ID == "" {
		return s.identity.MachineTokenByName(ctx, tx, p.ID, token)
	}
	return tok, nil
}

// tokenOf describes the token the caller is, for auth.whoami; nil for a
// person's session.
func (s *Server) tokenOf(ctx context.Context, c *call) (*api.Token, error) {
	if c.principal.TokenID == "" {
		return nil, nil
	}
	tok, err := s.identity.MachineToken(ctx, s.pool, c.principal.TokenID)
	if err != nil {
		return nil, err
	}
	return &tok, nil
}
