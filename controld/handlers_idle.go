package controld

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// idleEndpoints are idle release's (controld/idle): a project's policy,
// and the gateways' activity reports.
func (s *Server) idleEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpProjectPolicy, s.projectSetPolicy),
		query(s, gateproto.OpGateActivity, s.gateActivity),
	}
}

func (s *Server) newIdleRunner() (*idle.Runner, error) {
	return idle.NewRunner(idle.Config{Settings: s.cfg.Idle, Pool: s.pool, Mutations: s.mut, Released: s.kickQueue,
		Mailer: s.billing.Config().Mailer,
		Now:    s.cfg.Now, Log: s.cfg.Log.With("loop", "idle")})
}

// IdleTick runs the idle evaluator once now (for tests).
func (s *Server) IdleTick(ctx context.Context) (idle.TickResult, error) {
	return s.idle.Tick(ctx)
}

// projectSetPolicy sets a project's idle period; owners only.
func (s *Server) projectSetPolicy(ctx context.Context, c *call, req api.ProjectPolicyRequest) (work[api.ProjectPolicy], error) {
	secs, err := idle.ParsePeriod("idle-release-after", req.IdleReleaseAfter, s.cfg.Idle.MinPeriod, true)
	if err != nil {
		return nil, err
	}
	if secs == nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "no idle period given").WithHint("give --idle-release-after 2h, or off")
	}
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.ProjectPolicy, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, c.principal.UserID, c.principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		pol, err := s.cfg.Idle.SetProjectPolicy(ctx, tx, p, *secs, s.now())
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

// allocCreatePolicy reads the idle period and maximum duration of a
// create, before anything is written.
func (s *Server) allocCreatePolicy(req api.AllocCreateRequest) (idleSecs, maxSecs *int64, err error) {
	if idleSecs, err = idle.ParsePeriod("idle-release-after", req.IdleReleaseAfter, s.cfg.Idle.MinPeriod, true); err != nil {
		return nil, nil, err
	}
	if maxSecs, err = idle.ParsePeriod("max-duration", req.MaxDuration, s.cfg.Idle.MinPeriod, false); err != nil {
		return nil, nil, err
	}
	return idleSecs, maxSecs, nil
}

// gateActivity records a gateway's batch of allocation activity: the last
// channel data of each allocation's sessions and forwards. It is
// telemetry, like a node's heartbeat: not a mutation (no audit row, no
// event, every 15 s from every gateway).
func (s *Server) gateActivity(ctx context.Context, c *call, req gateproto.GateActivityRequest) (*gateproto.GateActivityResponse, error) {
	if len(req.LastActive) > 100_000 {
		return nil, api.Errorf(api.CodeInvalidArgument, "at most 100000 allocations per report")
	}
	n, err := idle.RecordGateActivity(ctx, s.pool, req.LastActive, s.now())
	if err != nil {
		return nil, err
	}
	return &gateproto.GateActivityResponse{Recorded: n}, nil
}

// gpuActive records a heartbeat's GPU activity (hosts.Config.GPUActive).
func (s *Server) gpuActive(ctx context.Context, nodeID string, active map[string]time.Time) error {
	_, err := idle.RecordGPUActivity(ctx, s.pool, nodeID, active, s.now())
	return err
}
