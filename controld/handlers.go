package controld

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

func (s *Server) endpoints() []endpointDef {
	return append([]endpointDef{
		{api.EndpointAuthLogin, s.authEndpoint(api.EndpointAuthLogin)},
		{api.EndpointAuthExchange, s.authEndpoint(api.EndpointAuthExchange)},
		{api.EndpointAuthLogout, s.mutation(api.EndpointAuthLogout, loggedIn, s.logout)},
		{api.EndpointAuthWhoami, s.query(api.EndpointAuthWhoami, loggedIn, s.whoami)},
		{api.EndpointAuthConfig, s.query(api.EndpointAuthConfig, public, s.authConfig)},

		{api.EndpointProjectCreate, s.mutation(api.EndpointProjectCreate, loggedIn, s.projectCreate)},
		{api.EndpointProjectList, s.query(api.EndpointProjectList, loggedIn, s.projectList)},
		{api.EndpointProjectMembers, s.query(api.EndpointProjectMembers, loggedIn, s.projectMembers)},
		{api.EndpointProjectAddMem, s.mutation(api.EndpointProjectAddMem, loggedIn, s.projectAddMember)},

		{api.EndpointCatalogList, s.query(api.EndpointCatalogList, loggedIn, s.catalogList)},

		{api.EndpointNodeList, s.query(api.EndpointNodeList, operatorOnly, s.nodeList)},
		{api.EndpointNodeGet, s.query(api.EndpointNodeGet, operatorOnly, s.nodeGet)},
		{api.EndpointSlotsApprove, s.mutation(api.EndpointSlotsApprove, operatorOnly, s.slotsApprove)},
		{api.EndpointNodeDrain, s.mutation(api.EndpointNodeDrain, operatorOnly, s.nodeDrain)},
		{api.EndpointNodeEnroll, s.secretMutation(api.EndpointNodeEnroll, operatorOnly, s.nodeEnroll)},

		{api.EndpointAllocCreate, s.mutation(api.EndpointAllocCreate, loggedIn, s.allocCreate)},
		{api.EndpointAllocGet, s.query(api.EndpointAllocGet, loggedIn, s.allocGet)},
		{api.EndpointAllocList, s.query(api.EndpointAllocList, loggedIn, s.allocList)},
		{api.EndpointAllocRelease, s.mutation(api.EndpointAllocRelease, loggedIn, s.allocRelease)},
		{api.EndpointAllocQuote, s.query(api.EndpointAllocQuote, loggedIn, s.allocQuote)},

		{api.EndpointBillingTopup, s.mutation(api.EndpointBillingTopup, loggedIn, s.billingTopup)},
		{api.EndpointAdminRefund, s.mutation(api.EndpointAdminRefund, adminOnly, s.adminRefund)},
		{api.EndpointAdminCredit, s.mutation(api.EndpointAdminCredit, adminOnly, s.adminCredit)},
	}, slices.Concat(s.sshEndpoints(), s.billingEndpoints(), s.userEndpoints(), s.busEndpoints(), s.gatewayEndpoints())...)
}

func (s *Server) logout(_ context.Context, c *call) (mutate.Func, error) {
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		p := c.principal
		if err := identity.Revoke(ctx, tx, p.SessionID, s.now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		return api.LogoutResponse{SessionID: p.SessionID}, mutate.Effect{
			Audit: audit.Entry{Action: "auth.logout", TargetType: "session", TargetID: p.SessionID},
			Events: []outbox.Event{{Kind: api.EventSessionRevoked, Subject: p.SessionID, Users: []string{p.UserID},
				Payload: api.SessionRevoked{UserID: p.UserID, SessionIDs: []string{p.SessionID}, Reason: "logout"}}},
		}, nil
	}, nil
}

func (s *Server) whoami(ctx context.Context, c *call) (any, error) {
	u, err := identity.UserByID(ctx, s.pool, c.principal.UserID)
	if err != nil {
		return nil, err
	}
	projects, err := project.ListForUser(ctx, s.pool, u.ID)
	if err != nil {
		return nil, err
	}
	if projects == nil {
		projects = []api.Project{}
	}
	return api.WhoamiResponse{User: u, SessionID: c.principal.SessionID, ExpiresAt: c.principal.ExpiresAt, Projects: projects}, nil
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

func (s *Server) catalogList(ctx context.Context, _ *call) (any, error) {
	skus, err := catalog.List(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	return api.CatalogResponse{SKUs: skus}, nil
}

func (s *Server) nodeList(ctx context.Context, _ *call) (any, error) {
	ns, err := node.List(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	if ns == nil {
		ns = []api.Node{}
	}
	return api.NodeListResponse{Nodes: ns}, nil
}

func (s *Server) nodeGet(ctx context.Context, c *call) (any, error) {
	var req api.NodeRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return node.Get(ctx, s.pool, req.Node)
}

func (s *Server) slotsApprove(_ context.Context, c *call) (mutate.Func, error) {
	var req api.SlotsApproveRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		d, err := node.Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		n, err := node.ApproveSlots(ctx, tx, d.Node.ID, req.Slots)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if d, err = node.Get(ctx, tx, d.Node.ID); err != nil {
			return nil, mutate.Effect{}, err
		}
		s.kickQueue()
		return d, mutate.Effect{
			Audit: audit.Entry{Action: "node.slots_approve", TargetType: "node", TargetID: d.Node.ID,
				Detail: map[string]any{"approved": n, "slots": req.Slots}},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

func (s *Server) nodeDrain(_ context.Context, c *call) (mutate.Func, error) {
	var req api.NodeRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		d, err := node.Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := node.Drain(ctx, tx, d.Node.ID, s.now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		d.Node.State = api.NodeDraining
		return d.Node, mutate.Effect{
			Audit:  audit.Entry{Action: "node.drain", TargetType: "node", TargetID: d.Node.ID},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

// decodeAllocCreate reads and checks the request alloc.create and
// alloc.quote share.
func decodeAllocCreate(c *call) (api.AllocCreateRequest, error) {
	var req api.AllocCreateRequest
	if err := c.decode(&req); err != nil {
		return req, err
	}
	if req.Project == "" {
		req.Project = c.project
	}
	if req.GPUs <= 0 {
		return req, api.Errorf(api.CodeInvalidArgument, "gpus must be a positive number, got %d", req.GPUs)
	}
	return req, nil
}

func (s *Server) allocCreate(_ context.Context, c *call) (mutate.Func, error) {
	req, err := decodeAllocCreate(c)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return alloc.Create(ctx, tx, c.actor(), req, s.now())
	}, nil
}

// allocQuote is `alloc create --dry-run`: a read, not a mutation, so it
// needs no Idempotency-Key and can leave no idempotency record behind.
func (s *Server) allocQuote(ctx context.Context, c *call) (any, error) {
	req, err := decodeAllocCreate(c)
	if err != nil {
		return nil, err
	}
	q, err := alloc.Quote(ctx, s.pool, c.actor(), req, s.now())
	if err != nil {
		return nil, err
	}
	balance, err := billing.Balance(ctx, s.pool, q.ProjectID)
	if err != nil {
		return nil, fmt.Errorf("quote balance: %w", err)
	}
	q.BalanceMinor = &balance
	if runway, ok := alloc.Runway(balance, q.PricePerHourMinor); ok {
		q.RunwaySeconds = &runway
	}
	return q, nil
}

func (s *Server) allocGet(ctx context.Context, c *call) (any, error) {
	var req api.AllocRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	a, err := alloc.Get(ctx, s.pool, c.actor(), req.ID)
	if err != nil {
		return nil, err
	}
	a.Timeline, err = tasks.Timeline(ctx, s.pool, a.ID)
	return a, err
}

func (s *Server) nodeEnroll(_ context.Context, c *call) (mutate.Func, error) {
	var req api.EnrollTokenRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return node.CreateEnrollToken(ctx, tx, req, c.principal.UserID, s.now())
	}, nil
}

func (s *Server) allocList(ctx context.Context, c *call) (any, error) {
	var req api.AllocListRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Project == "" {
		req.Project = c.project
	}
	as, err := alloc.List(ctx, s.pool, c.actor(), req)
	if err != nil {
		return nil, err
	}
	return api.AllocListResponse{Allocations: as}, nil
}

func (s *Server) allocRelease(_ context.Context, c *call) (mutate.Func, error) {
	var req api.AllocReleaseRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		a, eff, err := alloc.Release(ctx, tx, c.actor(), req, s.now())
		if err == nil && a.State == api.AllocReleased {
			s.kickQueue()
		}
		return a, eff, err
	}, nil
}
