package idle

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// Deps are what idle release's endpoints need of the server.
type Deps struct {
	// DB serves the writes outside a mutation (activity reports) and the
	// reads before one (the caller's default project).
	DB       store.Querier
	Settings Settings
	Now      func() time.Time
}

// Endpoints are idle release's (docs/idle.md): a project's policy, and
// the gateways' activity reports (docs/decisions/0069-domain-endpoints.md).
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpProjectPolicy, h.setPolicy),
		endpoint.Query(gateproto.OpGateActivity, h.gateActivity),
	}
}

type handlers struct{ Deps }

// MaxActivityReport bounds the allocations of one gateway's report.
const MaxActivityReport = 100_000

// setPolicy sets a project's idle period; owners only.
func (h handlers) setPolicy(ctx context.Context, r *endpoint.Request, req api.ProjectPolicyRequest) (endpoint.Work[api.ProjectPolicy], error) {
	secs, err := ParsePeriod("idle-release-after", req.IdleReleaseAfter, h.Settings.MinPeriod, true)
	if err != nil {
		return nil, err
	}
	if secs == nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "no idle period given").WithHint("give --idle-release-after 2h, or off")
	}
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.ProjectPolicy, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		pol, err := h.Settings.SetProjectPolicy(ctx, tx, p, *secs, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		users, err := project.MemberIDs(ctx, tx, p.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &pol, mutate.Effect{
			Audit: audit.Entry{Action: api.EndpointProjectPolicy, TargetType: "project", TargetID: p.ID, ProjectID: p.ID,
				Detail: map[string]any{"idle_release_after_seconds": *secs}},
			Events: []outbox.Event{{Kind: api.EventProjectPolicy, Subject: p.ID, ProjectID: p.ID, Users: users, Payload: pol}},
		}, nil
	}, nil
}

// gateActivity records a gateway's batch of allocation activity: the last
// channel data of each allocation's sessions and forwards. It is
// telemetry, like a node's heartbeat: not a mutation (no audit row, no
// event, every 15 s from every gateway).
func (h handlers) gateActivity(ctx context.Context, _ *endpoint.Request, req gateproto.GateActivityRequest) (*gateproto.GateActivityResponse, error) {
	if len(req.LastActive) > MaxActivityReport {
		return nil, api.Errorf(api.CodeInvalidArgument, "at most 100000 allocations per report")
	}
	n, err := RecordGateActivity(ctx, h.DB, req.LastActive, h.Now())
	if err != nil {
		return nil, err
	}
	return &gateproto.GateActivityResponse{Recorded: n}, nil
}
