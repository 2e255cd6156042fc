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
		mutation(s, api.OpProjectCreate, s.projectCreate),
		query(s, api.OpProjectList, s.projectList),
		query(s, api.OpProjectMembers, s.projectMembers),
		mutation(s, api.OpProjectAddMem, s.projectAddMember),
		mutation(s, api.OpProjectUse, s.projectUse),
	}
}

// projectRef is the project a request acts in: the one its body names,
// else the Gpuaas-Project header, else the caller's default project
// (`gpuaas project use`), else "" (project.Resolve then says none was
// given). The client decides between a flag, its environment and its
// config context; the default is the server's, so it is the same on every
// machine and over SSH.
func (s *Server) projectRef(ctx context.Context, c *call, named string) (string, error) {
	switch {
	case named != "":
		return named, nil
	case c.project != "":
		return c.project, nil
	case c.principal == nil || c.principal.IsGateway():
		return "", nil
	}
	p, ok, err := project.DefaultOf(ctx, s.pool, c.principal.UserID)
	if err != nil || !ok {
		return "", err
	}
	if p.Role == "" {
		return "", api.Errorf(api.CodeNotFound, "your default project %s is not one of your projects any more", p.Name).
			WithHint("choose another with `gpuaas project use NAME` (see `gpuaas project list`), or pass -p/--project")
	}
	return p.ID, nil
}

// projectUse makes a project the caller belongs to their default.
func (s *Server) projectUse(_ context.Context, c *call, req api.ProjectUseRequest) (work[api.Project], error) {
	req.Project = strings.TrimSpace(req.Project)
	if req.Project == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which project? name one you belong to").
			WithHint("see `gpuaas project list`")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Project, mutate.Effect, error) {
		// Membership, not a platform role: an admin's default is still a
		// project they work in.
		p, err := project.Authorize(ctx, tx, req.Project, c.principal.UserID, "", project.AccessRead)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := project.SetDefault(ctx, tx, c.principal.UserID, p.ID, s.now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		return &p, mutate.Effect{
			Audit: audit.Entry{Action: api.EndpointProjectUse, TargetType: "user", TargetID: c.principal.UserID,
				ProjectID: p.ID, Detail: req},
			Events: []outbox.Event{{Kind: api.EventDefaultProject, Subject: c.principal.UserID, ProjectID: p.ID,
				Users: []string{c.principal.UserID}, Payload: p}},
		}, nil
	}, nil
}

func (s *Server) projectCreate(_ context.Context, c *call, req api.ProjectCreateRequest) (work[api.Project], error) {
	req.Name = strings.TrimSpace(req.Name)
	if err := project.ValidateName(req.Name); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Project, mutate.Effect, error) {
		p, err := project.Create(ctx, tx, req.Name, c.principal.UserID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &p, mutate.Effect{
			Audit:  audit.Entry{Action: "project.create", TargetType: "project", TargetID: p.ID, ProjectID: p.ID, Detail: req},
			Events: []outbox.Event{{Kind: api.EventProject, Subject: p.ID, ProjectID: p.ID, Users: []string{c.principal.UserID}, Payload: p}},
		}, nil
	}, nil
}

func (s *Server) projectList(ctx context.Context, c *call, _ api.Empty) (*api.ProjectListResponse, error) {
	ps, err := project.ListForUser(ctx, s.pool, c.principal.UserID)
	if err != nil {
		return nil, err
	}
	if ps == nil {
		ps = []api.Project{}
	}
	return &api.ProjectListResponse{Projects: ps}, nil
}

func (s *Server) projectMembers(ctx context.Context, c *call, req api.ProjectRef) (*api.MembersResponse, error) {
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	req.Project = ref
	p, err := project.Authorize(ctx, s.pool, req.Project, c.principal.UserID, c.principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	ms, err := project.Members(ctx, s.pool, p.ID)
	if err != nil {
		return nil, err
	}
	if ms, err = s.liveMembers(ctx, p.ID, ms); err != nil {
		return nil, err
	}
	return &api.MembersResponse{Project: p, Members: ms}, nil
}

// liveMembers drops from ms the tokens that can no longer act (revoked or
// expired): their principals stay members, so that what they did keeps
// its actor, but they have no access to list.
func (s *Server) liveMembers(ctx context.Context, projectID string, ms []api.Member) ([]api.Member, error) {
	live, err := s.identity.LiveTokenIDs(ctx, s.pool, projectID, s.now())
	if err != nil {
		return nil, err
	}
	out := ms[:0]
	for _, m := range ms {
		if m.Kind != api.MemberToken || live[m.UserID] {
			out = append(out, m)
		}
	}
	return out, nil
}

func (s *Server) projectAddMember(ctx context.Context, c *call, req api.AddMemberRequest) (work[api.MembersResponse], error) {
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	req.Project = ref
	return func(ctx context.Context, tx pgx.Tx) (*api.MembersResponse, mutate.Effect, error) {
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
		return &api.MembersResponse{Project: p, Members: ms}, mutate.Effect{
			Audit: audit.Entry{Action: "project.set_member", TargetType: "project", TargetID: p.ID, ProjectID: p.ID,
				Detail: map[string]string{"user_id": u.ID, "role": req.Role}},
			Events: []outbox.Event{{Kind: api.EventProject, Subject: p.ID, ProjectID: p.ID, Users: users,
				Payload: map[string]string{"member": u.ID, "role": req.Role}}},
		}, nil
	}, nil
}
