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

// projectEndpoints are projects and their members (controld/project).
func (s *Server) projectEndpoints() []endpointDef {
	return []endpointDef{
		s.mutation(api.EndpointProjectCreate, loggedIn, s.projectCreate),
		s.query(api.EndpointProjectList, loggedIn, s.projectList),
		s.query(api.EndpointProjectMembers, loggedIn, s.projectMembers),
		s.mutation(api.EndpointProjectAddMem, loggedIn, s.projectAddMember),
	}
}

func (s *Server) projectCreate(_ context.Context, c *call) (mutate.Func, error) {
	var req api.ProjectCreateRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	req.Name = strings.TrimSpace(req.Name)
	if err := project.ValidateName(req.Name); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		p, err := project.Create(ctx, tx, req.Name, c.principal.UserID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return p, mutate.Effect{
			Audit:  audit.Entry{Action: "project.create", TargetType: "project", TargetID: p.ID, ProjectID: p.ID, Detail: req},
			Events: []outbox.Event{{Kind: api.EventProject, Subject: p.ID, ProjectID: p.ID, Users: []string{c.principal.UserID}, Payload: p}},
		}, nil
	}, nil
}

func (s *Server) projectList(ctx context.Context, c *call) (any, error) {
	ps, err := project.ListForUser(ctx, s.pool, c.principal.UserID)
	if err != nil {
		return nil, err
	}
	if ps == nil {
		ps = []api.Project{}
	}
	return api.ProjectListResponse{Projects: ps}, nil
}

func (s *Server) projectMembers(ctx context.Context, c *call) (any, error) {
	var req api.ProjectRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Project == "" {
		req.Project = c.project
	}
	p, err := project.Authorize(ctx, s.pool, req.Project, c.principal.UserID, c.principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	ms, err := project.Members(ctx, s.pool, p.ID)
	if err != nil {
		return nil, err
	}
	return api.MembersResponse{Project: p, Members: ms}, nil
}

func (s *Server) projectAddMember(_ context.Context, c *call) (mutate.Func, error) {
	var req api.AddMemberRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Project == "" {
		req.Project = c.project
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, req.Project, c.principal.UserID, c.principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		u, err := identity.UserByEmail(ctx, tx, req.Email)
		if err != nil {
			return nil, mutate.Effect{}, api.Errorf(api.CodeNotFound, "no user with email %s", req.Email).
				WithHint("an admin can invite them (`gpuaas admin user add EMAIL`); OIDC users appear after their first login")
		}
		if err := project.SetMember(ctx, tx, p.ID, u.ID, req.Role, s.now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		ms, err := project.Members(ctx, tx, p.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		users, err := project.MemberIDs(ctx, tx, p.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return api.MembersResponse{Project: p, Members: ms}, mutate.Effect{
			Audit: audit.Entry{Action: "project.set_member", TargetType: "project", TargetID: p.ID, ProjectID: p.ID,
				Detail: map[string]string{"user_id": u.ID, "role": req.Role}},
			Events: []outbox.Event{{Kind: api.EventProject, Subject: p.ID, ProjectID: p.ID, Users: users,
				Payload: map[string]string{"member": u.ID, "role": req.Role}}},
		}, nil
	}, nil
}
