package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/jobspec"
)

// IDPrefix starts every job id ("j-…").
const IDPrefix = "j"

var (
	nameRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Check refuses a request that can never be started, naming the field,
// before anything is read or written.
func Check(req *api.JobCreateRequest) error {
	bad := func(field, format string, args ...any) error {
		return api.Errorf(api.CodeInvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case req.AllocationID == "":
		return bad("allocation_id", "required: the active allocation to run on")
	case strings.TrimSpace(req.Run) == "":
		return bad("run", "required: the command the job runs")
	case len(req.Run) > jobspec.MaxScriptBytes || len(req.Setup) > jobspec.MaxScriptBytes:
		return bad("run", "setup and run are at most %d bytes each", jobspec.MaxScriptBytes)
	case strings.ContainsRune(req.Run+req.Setup, 0):
		return bad("run", "setup and run must not contain a NUL byte")
	case req.Name != "" && !nameRe.MatchString(req.Name):
		return bad("name", "%q: 1-63 lowercase letters, digits, '.', '_' or '-'", req.Name)
	case req.TimeoutSeconds < 0 || time.Duration(req.TimeoutSeconds)*time.Second > jobspec.MaxTimeout:
		return bad("timeout_seconds", "%d: want 0 (none) to %d", req.TimeoutSeconds, int64(jobspec.MaxTimeout/time.Second))
	case req.Retries < 0 || req.Retries > jobspec.MaxRetries:
		return bad("retries", "%d: want 0 to %d", req.Retries, jobspec.MaxRetries)
	case len(req.Env)+len(req.Secrets) > jobspec.MaxEnv:
		return bad("env", "%d variables; at most %d", len(req.Env)+len(req.Secrets), jobspec.MaxEnv)
	}
	if err := checkSecrets(req); err != nil {
		return err
	}
	if err := checkWorkdir(req.Workdir); err != nil {
		return err
	}
	switch req.Release {
	case "":
		req.Release = jobspec.ReleaseOnExit
	case jobspec.ReleaseOnExit, jobspec.ReleaseKeep, jobspec.ReleaseOnSuccess:
	default:
		return bad("release", "%q: want on-exit, keep or on-success", req.Release)
	}
	for k, v := range req.Env {
		if !envNameRe.MatchString(k) {
			return bad("env."+k, "not a variable name")
		}
		if strings.ContainsRune(v, 0) {
			return bad("env."+k, "contains a NUL byte")
		}
	}
	return nil
}

// Create starts a job on an active allocation the actor may write to:
// the row (starting) and its job.start task, in the caller's transaction.
// An allocation that is not active, or that runs a job already, is a
// conflict; nothing is written then.
func Create(ctx context.Context, tx pgx.Tx, actor alloc.Actor, req api.JobCreateRequest, cfg Config, now time.Time) (api.Job, mutate.Effect, error) {
	cfg = cfg.withDefaults()
	if err := Check(&req); err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	a, err := alloc.Get(ctx, tx, actor, req.AllocationID)
	if err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	p, err := project.Authorize(ctx, tx, a.ProjectID, actor.UserID, actor.Role, project.AccessWrite)
	if err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	// Its state under a share lock: an activation waits for this
	// transaction, so it cannot pass a job created queued (queue.go).
	h, err := alloc.HoldState(ctx, tx, a.ID)
	if err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	a.State, a.NodeID = h.State, h.NodeID
	sp := spec{Setup: req.Setup, Run: req.Run, Env: req.Env, Secrets: req.Secrets, Timeout: req.TimeoutSeconds, Workdir: req.Workdir}
	if req.Image != "" {
		img, err := resolveImage(ctx, tx, a, req.Image) // image.go
		if err != nil {
			return api.Job{}, mutate.Effect{}, err
		}
		sp.Image, sp.ImageName = img.Ref, img.Name
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return api.Job{}, mutate.Effect{}, fmt.Errorf("job spec: %w", err)
	}
	if a.State != api.AllocActive {
		if !req.Queue || (a.State != api.AllocRequested && a.State != api.AllocProvisioning) {
			return api.Job{}, mutate.Effect{}, api.Errorf(api.CodeConflict, "allocation %s is %s: a job runs on an active allocation", a.ID, a.State).
				WithHint("wait for it with `gpuaas alloc create --wait`, queue the job on it (queue: true), or see `gpuaas alloc get " + a.ID + "`")
		}
		return createQueued(ctx, tx, actor, req, p, a, raw, cfg, now)
	}
	params := startParams("", a.ID, sp, cfg)
	if params.SealedEnv, err = sealSecrets(ctx, tx, cfg.Secrets, p, a.NodeID, req.Secrets); err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	if params.GPUs, err = imageGPUs(ctx, tx, sp, a.ID); err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	id := ids.New(IDPrefix)
	params.JobID = id
	taskID, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: a.NodeID, Type: api.TaskJobStart, Params: params}, now)
	if err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	return insert(ctx, tx, actor, req, a, raw, api.JobStarting, taskID, id, now)
}

// insert writes the job's row (node and task: none while queued) and
// returns it with its effect.
func insert(ctx context.Context, tx pgx.Tx, actor alloc.Actor, req api.JobCreateRequest, a api.Allocation, raw []byte,
	state, taskID, id string, now time.Time) (api.Job, mutate.Effect, error) {
	var node *string
	if state != api.JobQueued {
		node = &a.NodeID
	}
	_, err := tx.Exec(ctx, `INSERT INTO jobs (id, project_id, user_id, allocation_id, node_id, name, spec, release, state,
		task_id, created_at, updated_at, retries) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$11,$12)`,
		id, a.ProjectID, actor.UserID, a.ID, node, req.Name, raw, req.Release, state, taskID, now, req.Retries)
	if pe := (*pgconn.PgError)(nil); asPgError(err, &pe) && pe.ConstraintName == "jobs_one_open_per_allocation" {
		return api.Job{}, mutate.Effect{}, api.Errorf(api.CodeConflict, "allocation %s runs a job already: one job at a time", a.ID).
			WithHint("see `gpuaas job list`")
	}
	if err != nil {
		return api.Job{}, mutate.Effect{}, fmt.Errorf("insert job: %w", err)
	}
	j, err := load(ctx, tx, id, false)
	if err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	list := []api.Job{j.Job}
	if err := placeInLine(ctx, tx, list); err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	eff, err := effect(ctx, tx, "job.create", j.Job, map[string]any{"release": j.Release, "env_names": j.EnvNames,
		"retries": j.Retries})
	return list[0], eff, err
}

// startParams are job.start's params: the environment as NAME=value.
func startParams(jobID, allocID string, sp spec, cfg Config) hostproto.JobStartParams {
	p := hostproto.JobStartParams{JobID: jobID, AllocationID: allocID, PosixUser: api.PosixUser(allocID),
		Setup: sp.Setup, Run: sp.Run, Timeout: time.Duration(sp.Timeout) * time.Second, Wait: cfg.StartWait,
		LogMaxBytes: cfg.LogMaxBytes, Workdir: sp.Workdir, Image: sp.Image}
	for k, v := range sp.Env {
		p.Env = append(p.Env, k+"="+v)
	}
	return p
}
