package workloads

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Bounds of a request.
const (
	MaxArgs     = 256
	MaxArgBytes = 64 << 10 // all arguments together
	MaxEnv      = 128
)

var (
	nameRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func bad(field, format string, args ...any) error {
	return api.Errorf(api.CodeInvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// Check refuses a request that can never run, naming the field, before
// anything is read or written.
func Check(req *api.AppRunRequest) error {
	req.Image, req.Name = strings.TrimSpace(req.Image), strings.TrimSpace(req.Name)
	switch {
	case req.Image == "":
		return bad("image", "required: a catalog image's name or id (see `gpuaas image list`)")
	case req.AllocationID == "":
		return bad("allocation_id", "required: the active allocation to run on")
	case req.Name != "" && !nameRe.MatchString(req.Name):
		return bad("name", "%q: 1-63 lowercase letters, digits, '.', '_' or '-'", req.Name)
	case len(req.Command) > MaxArgs:
		return bad("command", "%d arguments; at most %d", len(req.Command), MaxArgs)
	case len(req.Env) > MaxEnv:
		return bad("env", "%d variables; at most %d", len(req.Env), MaxEnv)
	}
	if err := checkGPUs(req); err != nil {
		return err
	}
	if err := checkReadiness(req); err != nil {
		return err
	}
	n := 0
	for i, a := range req.Command {
		n += len(a)
		if strings.ContainsRune(a, 0) {
			return bad(fmt.Sprintf("command[%d]", i), "contains a NUL byte")
		}
	}
	if n > MaxArgBytes {
		return bad("command", "%d bytes; at most %d", n, MaxArgBytes)
	}
	if len(req.Command) > 0 && req.Command[0] == "" {
		return bad("command[0]", "empty program")
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

// usable refuses an image a workload may not run, naming it: not the
// allocation's project's own nor the platform's, or not promoted and
// verified.
func usable(img api.Image, projectID string) error {
	if img.ProjectID != "" && img.ProjectID != projectID {
		return api.Errorf(api.CodeNotFound, "no image %s in the allocation's project", img.ID).
			WithHint("see `gpuaas image list`")
	}
	return img.RunRefusal("workload")
}

// Run starts a workload on an active allocation the actor may write to:
// the row (pending) and its workload.start task, in the caller's
// transaction. Nothing is written on a refusal.
func Run(ctx context.Context, tx pgx.Tx, actor alloc.Actor, req api.AppRunRequest, cfg Config, now time.Time) (api.Workload, mutate.Effect, error) {
	if err := Check(&req); err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	a, err := alloc.Get(ctx, tx, actor, req.AllocationID)
	if err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	if _, err := project.Authorize(ctx, tx, a.ProjectID, actor.UserID, actor.Role, project.AccessWrite); err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	if a.State != api.AllocActive {
		return api.Workload{}, mutate.Effect{}, api.Errorf(api.CodeConflict, "allocation %s is %s: a workload runs on an active allocation", a.ID, a.State).
			WithHint("wait for it with `gpuaas alloc create --wait`, or see `gpuaas alloc get " + a.ID + "`")
	}
	if !api.RunsWorkloads(a.Shape) {
		return api.Workload{}, mutate.Effect{}, api.Errorf(api.CodeInvalidArgument, "allocation %s is a %s: workloads run on bare-metal and slice allocations", a.ID, a.Shape).
			WithHint("see docs/apps.md")
	}
	// A published app of that name wins over an image of it
	// (docs/apps.md, "Publishing apps"): its stored manifest fills what
	// the request leaves unset.
	// Its own price per hour is copied onto the row (docs/apps.md,
	// "Prices"): a later change of it does not re-price this workload.
	var appID string
	var appPrice int64
	if app, ok, err := apps.ForRun(ctx, tx, req.Image, a.ProjectID); err != nil || ok {
		if err == nil {
			err = apps.Merge(&req, app)
			appID, appPrice = app.ID, app.PricePerHourMinor
		}
		if err == nil {
			err = Check(&req)
		}
		if err != nil {
			return api.Workload{}, mutate.Effect{}, err
		}
	}
	img, err := images.Find(ctx, tx, req.Image, a.ProjectID, false)
	if err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	if err := usable(img, a.ProjectID); err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	// The price follows the image's bytes, not the name it was run by
	// (docs/decisions/0059-app-prices.md): the image of a priced
	// platform app, run directly or under another app's name, carries
	// that app's price (the highest such) and its id for the meter.
	if priced, ok, err := apps.PricedImage(ctx, tx, img.Digest); err != nil {
		return api.Workload{}, mutate.Effect{}, err
	} else if ok && priced.PricePerHourMinor > appPrice {
		appID, appPrice = priced.ID, priced.PricePerHourMinor
	}
	gpus, count, err := workloadGPUs(ctx, tx, a, req)
	if err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	mounts, err := workloadMounts(ctx, tx, a, req) // mounts.go
	if err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	if req.Name == "" {
		req.Name = img.Name
	}
	sp := spec{Command: req.Command, Env: req.Env, Readiness: req.Readiness, NoGPUs: req.NoGPUs, ShmBytes: req.ShmBytes}
	sp.Mounts = mounts
	raw, err := json.Marshal(sp)
	if err != nil {
		return api.Workload{}, mutate.Effect{}, fmt.Errorf("workload spec: %w", err)
	}
	id := ids.New(IDPrefix)
	// The row first: a name in use refuses before a task is queued.
	_, err = tx.Exec(ctx, `INSERT INTO workloads (id, project_id, user_id, allocation_id, node_id, name, image_id, image_name,
		image_ref, digest, spec, state, created_at, updated_at, gpus, app_id, app_price_per_hour_minor)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,'pending',$12,$12,$13,$14,$15)`,
		id, a.ProjectID, actor.UserID, a.ID, a.NodeID, req.Name, img.ID, img.Name, img.Ref, img.Digest, raw, now, count, appID, appPrice)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.ConstraintName == "workloads_name_per_allocation" {
		return api.Workload{}, mutate.Effect{}, api.Errorf(api.CodeConflict, "name %q is in use on allocation %s", req.Name, a.ID).
			WithHint("give another with --name, or remove the other: `gpuaas app rm`")
	}
	if err != nil {
		return api.Workload{}, mutate.Effect{}, fmt.Errorf("insert workload: %w", err)
	}
	taskID, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: a.NodeID, Type: api.TaskWorkloadStart,
		Params: startParams(id, a.ID, img.Ref, sp, gpus, cfg)}, now)
	if err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	if _, err := tx.Exec(ctx, `UPDATE workloads SET task_id = $2 WHERE id = $1`, id, taskID); err != nil {
		return api.Workload{}, mutate.Effect{}, fmt.Errorf("workload %s task: %w", id, err)
	}
	w, err := load(ctx, tx, id, false)
	if err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	eff, err := effect(ctx, tx, "app.run", w.Workload, map[string]any{"name": w.Name, "env_names": w.EnvNames})
	return w.Workload, eff, err
}

// startParams are workload.start's params: the environment as NAME=value.
func startParams(id, allocID, ref string, sp spec, gpus []string, cfg Config) hostproto.WorkloadStartParams {
	p := hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: allocID, PosixUser: api.PosixUser(allocID),
		Image: ref, Command: sp.Command, GPUs: gpus, LogMaxBytes: cfg.LogMaxBytes, NoGPUs: sp.NoGPUs, ShmBytes: sp.ShmBytes}
	p.Mounts = sp.Mounts
	for k, v := range sp.Env {
		p.Env = append(p.Env, k+"="+v)
	}
	return p
}
