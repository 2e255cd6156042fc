// Package workloads owns workloads: catalog images run as rootless
// containers on an active allocation by its node's hostd (docs/apps.md,
// docs/decisions/0021-workloads-on-the-node.md). app.run checks the
// image is usable (promoted and verified, the project's own or the
// platform's), writes the row (pending) and queues workload.start; what
// hostd reports (workload.start, then workload.status every Config.Wait
// while it runs, workload.stop) moves it to running and to stopped or
// failed, with its exit code and last lines.
package workloads

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// IDPrefix starts every workload id ("w-…").
const IDPrefix = "w"

// Config tunes how controld follows workloads; the zero value is the
// defaults.
type Config struct {
	// Wait is how long one workload.status waits for a running container
	// to end before reporting it still runs (default 30s: its last lines
	// in `app logs` are at most that old; the first status after the
	// start waits 2s at most).
	Wait time.Duration
	// StopGrace is how long workload.stop waits after SIGTERM before
	// SIGKILL (default 10s, podman's own).
	StopGrace time.Duration
	// LogMaxBytes bounds what the node keeps of one workload's output in
	// LOGS (0: hostd's default, logstream.DefaultMaxBytes), as
	// StreamLimits.JobLogMaxBytes does a job's.
	LogMaxBytes int64
}

func (c Config) withDefaults() Config {
	if c.Wait <= 0 {
		c.Wait = 30 * time.Second
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 10 * time.Second
	}
	return c
}

// spec is what the row keeps of the request (its spec column).
type spec struct {
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Readiness is its probe (ready.go); NoGPUs and ShmBytes as asked.
	Readiness *api.WorkloadProbe `json:"readiness,omitempty"`
	NoGPUs    bool               `json:"no_gpus,omitempty"`
	ShmBytes  int64              `json:"shm_bytes,omitempty"`
	// Mounts are the allocation's volumes in the container (mounts.go).
	Mounts []api.WorkloadMount `json:"mounts,omitempty"`
}

const columns = `SELECT id, project_id, user_id, allocation_id, node_id, name, image_name, image_id, image_ref, digest,
	spec, state, exit_code, reason, pulled, last_lines, reported_at, stop_requested, created_at, started_at, ended_at,
	removed_at, task_id, gpus, ready_by, ready_at, app_id, app_price_per_hour_minor FROM workloads`

// row is a workload as read, with what the API does not show.
type row struct {
	api.Workload
	spec     spec
	imageRef string
	taskID   string
	// readyBy is when a probe not passed by then fails it (ready.go).
	readyBy *time.Time
}

func scan(r pgx.Row) (row, error) {
	var w row
	var raw []byte
	var lines string
	err := r.Scan(&w.ID, &w.ProjectID, &w.UserID, &w.AllocationID, &w.NodeID, &w.Name, &w.Image, &w.ImageID,
		&w.imageRef, &w.Digest, &raw, &w.State, &w.ExitCode, &w.Reason, &w.Pulled, &lines, &w.ReportedAt,
		&w.Stopping, &w.CreatedAt, &w.StartedAt, &w.EndedAt, &w.RemovedAt, &w.taskID, &w.GPUs, &w.readyBy, &w.ReadyAt, &w.AppID, &w.AppPricePerHourMinor)
	if err != nil {
		return w, err
	}
	if err := json.Unmarshal(raw, &w.spec); err != nil {
		return w, fmt.Errorf("workload %s spec: %w", w.ID, err)
	}
	w.Command, w.Readiness = w.spec.Command, w.spec.Readiness
	for k := range w.spec.Env {
		w.EnvNames = append(w.EnvNames, k)
	}
	slices.Sort(w.EnvNames)
	if lines != "" {
		w.LastLines = strings.Split(lines, "\n")
	}
	w.Stopping = w.Stopping && !api.WorkloadFinal(w.State)
	return w, nil
}

func notFound(id string) error {
	return api.Errorf(api.CodeNotFound, "workload %s not found", id).WithHint("see `gpuaas app ps`")
}

// load reads a workload; lock takes its row lock (FOR UPDATE).
func load(ctx context.Context, q store.Querier, id string, lock bool) (row, error) {
	sql := columns + ` WHERE id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	w, err := scan(q.QueryRow(ctx, sql, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return w, notFound(id)
	}
	if err != nil {
		return w, fmt.Errorf("load workload %s: %w", id, err)
	}
	return w, nil
}

// authorize checks the actor may act (want) on the workload's project; a
// workload of a project they cannot see is not found.
func authorize(ctx context.Context, q store.Querier, actor alloc.Actor, w row, want project.Access) error {
	return project.AuthorizeResource(ctx, q, w.ProjectID, actor.UserID, actor.Role, want, notFound(w.ID))
}

// Get returns a workload the actor may see.
func Get(ctx context.Context, q store.Querier, actor alloc.Actor, id string) (api.Workload, error) {
	w, err := load(ctx, q, id, false)
	if err != nil {
		return api.Workload{}, err
	}
	if err := authorize(ctx, q, actor, w, project.AccessRead); err != nil {
		return api.Workload{}, err
	}
	return w.Workload, nil
}

// List returns workloads newest first: a project's (req.Project, which the
// actor must be able to read), or else the actor's own; removed ones only
// with req.All.
func List(ctx context.Context, q store.Querier, actor alloc.Actor, req api.AppPsRequest) ([]api.Workload, error) {
	sql, args := columns+` WHERE user_id = $1`, []any{actor.UserID}
	if req.Project != "" {
		p, err := project.Authorize(ctx, q, req.Project, actor.UserID, actor.Role, project.AccessRead)
		if err != nil {
			return nil, err
		}
		sql, args = columns+` WHERE project_id = $1`, []any{p.ID}
	}
	if req.AllocationID != "" {
		sql += ` AND allocation_id = $2`
		args = append(args, req.AllocationID)
	}
	if !req.All {
		sql += ` AND removed_at IS NULL`
	}
	rows, err := q.Query(ctx, sql+` ORDER BY created_at DESC, id LIMIT 500`, args...)
	if err != nil {
		return nil, fmt.Errorf("list workloads: %w", err)
	}
	defer rows.Close()
	out := []api.Workload{}
	for rows.Next() {
		w, err := scan(rows)
		if err != nil {
			return nil, err
		}
		w.LastLines = nil // lists stay small: app get and app logs show them
		out = append(out, w.Workload)
	}
	return out, rows.Err()
}

// effect audits a change of a workload and tells its project's members.
func effect(ctx context.Context, q store.Querier, action string, w api.Workload, detail map[string]any) (mutate.Effect, error) {
	users, err := project.MemberIDs(ctx, q, w.ProjectID)
	if err != nil {
		return mutate.Effect{}, err
	}
	if detail == nil {
		detail = map[string]any{}
	}
	detail["allocation_id"], detail["state"], detail["image"], detail["digest"] = w.AllocationID, w.State, w.Image, w.Digest
	return mutate.Effect{
		Audit:  audit.Entry{Action: action, TargetType: "workload", TargetID: w.ID, ProjectID: w.ProjectID, Detail: detail},
		Events: []outbox.Event{stateEvent(w, users)},
	}, nil
}

func stateEvent(w api.Workload, users []string) outbox.Event {
	w.LastLines = nil
	return outbox.Event{Kind: api.EventWorkloadState, Subject: w.ID, ProjectID: w.ProjectID, Users: users, Payload: w}
}

// LogSource says where a workload the actor may see keeps its log (the
// LOGS subject its node publishes it on; "" before it is placed) and
// whether it has ended: read before its lines, a workload seen ended has
// published every line it will (hostd reports the end after its last
// lines: docs/decisions/0026-workload-logs-across-restarts.md).
func LogSource(ctx context.Context, q store.Querier, actor alloc.Actor, id string) (api.Workload, string, bool, error) {
	w, err := Get(ctx, q, actor, id)
	if err != nil {
		return w, "", false, err
	}
	ended := api.WorkloadFinal(w.State)
	if w.NodeID == "" || logstream.CheckToken("node", w.NodeID) != nil || logstream.CheckToken("workload", w.ID) != nil {
		return w, "", ended, nil
	}
	return w, logstream.Subject(w.NodeID, logstream.KindWorkload, w.ID), ended, nil
}
