package project

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
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// LiveTokens is what a project's member list needs of identity: which of
// the project's machine tokens can still act (identity.Service meets it).
type LiveTokens interface {
	LiveTokenIDs(ctx context.Context, q store.Querier, projectID string, now time.Time) (map[string]bool, error)
}

// Deps are what projects' endpoints need of the server.
type Deps struct {
	// DB serves the reads outside a mutation's transaction.
	DB     store.Querier
	Tokens LiveTokens
	Now    func() time.Time
}

// Endpoints are projects and their members (docs/decisions/0069-domain-endpoints.md).
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpProjectCreate, h.create),
		endpoint.Query(api.OpProjectList, h.list),
		endpoint.Query(api.OpProjectMembers, h.members),
		endpoint.Mutation(api.OpProjectAddMem, h.addMember),
		endpoint.Mutation(api.OpProjectUse, h.use),
	}
}

type handlers struct{ Deps }

// Ref is the project a request acts in: the one its body names, else the
// Gpuaas-Project header, else the caller's default project (`gpuaas
// project use`), else "" (Resolve then says none was given). The client
// decides between a flag, its environment and its config context; the
// default is the server's, so it is the same on every machine and over
// SSH.
func Ref(ctx context.Context, q store.Querier, r *endpoint.Request, named string) (string, error) {
	switch {
	case named != "":
		return named, nil
	case r.Project != "":
		return r.Project, nil
	case r.Principal == nil || r.Principal.IsGateway():
		return "", nil
	}
	p, ok, err := DefaultOf(ctx, q, r.Principal.UserID)
	if err != nil || !ok {
		return "", err
	}
	if p.Role == "" {
		return "", api.Errorf(api.CodeNotFound, "your default project %s is not one of your projects any more", p.Name).
			WithHint("choose another with `gpuaas project use NAME` (see `gpuaas project list`), or pass -p/--project")
	}
	return p.ID, nil
}

// use makes a project the caller belongs to their default.
func (h handlers) use(_ context.Context, r *endpoint.Request, req api.ProjectUseRequest) (endpoint.Work[api.Project], error) {
	req.Project = strings.TrimSpace(req.Project)
	if req.Project == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which project? name one you belong to").
			WithHint("see `gpuaas project list`")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Project, mutate.Effect, error) {
		// Membership, not a platform role: an admin's default is still a
		// project they work in.
		p, err := Authorize(ctx, tx, req.Project, r.Principal.UserID, "", AccessRead)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := SetDefault(ctx, tx, r.Principal.UserID, p.ID, h.Now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		return &p, mutate.Effect{
			Audit: audit.Entry{Action: api.EndpointProjectUse, TargetType: "user", TargetID: r.Principal.UserID,
				ProjectID: p.ID, Detail: req},
			Events: []outbox.Event{{Kind: api.EventDefaultProject, Subject: r.Principal.UserID, ProjectID: p.ID,
				Users: []string{r.Principal.UserID}, Payload: p}},
		}, nil
	}, nil
}

func (h handlers) create(_ context.Context, r *endpoint.Request, req api.ProjectCreateRequest) (endpoint.Work[api.Project], error) {
	req.Name = strings.TrimSpace(req.Name)
	if err := ValidateName(req.Name); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Project, mutate.Effect, error) {
		p, err := Create(ctx, tx, req.Name, r.Principal.UserID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &p, mutate.Effect{
			Audit:  audit.Entry{Action: "project.create", TargetType: "project", TargetID: p.ID, ProjectID: p.ID, Detail: req},
			Events: []outbox.Event{{Kind: api.EventProject, Subject: p.ID, ProjectID: p.ID, Users: []string{r.Principal.UserID}, Payload: p}},
		}, nil
	}, nil
}

func (h handlers) list(ctx context.Context, r *endpoint.Request, _ api.Empty) (*api.ProjectListResponse, error) {
	ps, err := ListForUser(ctx, h.DB, r.Principal.UserID)
	if err != nil {
		return nil, err
	}
	if ps == nil {
		ps = []api.Project{}
	}
	return &api.ProjectListResponse{Projects: ps}, nil
}

func (h handlers) members(ctx context.Context, r *endpoint.Request, req api.ProjectRef) (*api.MembersResponse, error) {
	ref, err := Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	p, err := Authorize(ctx, h.DB, ref, r.Principal.UserID, r.Principal.Role, AccessRead)
	if err != nil {
		return nil, err
	}
	ms, err := Members(ctx, h.DB, p.ID)
	if err != nil {
		return nil, err
	}
	if ms, err = h.liveMembers(ctx, p.ID, ms); err != nil {
		return nil, err
	}
	return &api.MembersResponse{Project: p, Members: ms}, nil
}

// liveMembers drops from ms the tokens that can no longer act (revoked or
// expired): their principals stay members, so that what they did keeps
// its actor, but they have no access to list.
func (h handlers) liveMembers(ctx context.Context, projectID string, ms []api.Member) ([]api.Member, error) {
	live, err := h.Tokens.LiveTokenIDs(ctx, h.DB, projectID, h.Now())
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

func (h handlers) addMember(ctx context.Context, r *endpoint.Request, req api.AddMemberRequest) (endpoint.Work[api.MembersResponse], error) {
	ref, err := Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	req.Project = ref
	return func(ctx context.Context, tx pgx.Tx) (*api.MembersResponse, mutate.Effect, error) {
		p, err := Authorize(ctx, tx, req.Project, r.Principal.UserID, r.Principal.Role, AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		u, err := identity.UserByEmail(ctx, tx, req.Email)
		if err != nil {
			return nil, mutate.Effect{}, api.Errorf(api.CodeNotFound, "no user with email %s", req.Email).
				WithHint("an admin can invite them (`gpuaas admin user add EMAIL`); OIDC users appear after their first login")
		}
		if err := SetMember(ctx, tx, p.ID, u.ID, req.Role, h.Now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		ms, err := Members(ctx, tx, p.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		users, err := MemberIDs(ctx, tx, p.ID)
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
