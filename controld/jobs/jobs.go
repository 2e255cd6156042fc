// Package jobs owns jobs: commands run unattended on an active
// allocation, supervised by the node's hostd (docs/jobs.md,
// docs/decisions/0015-jobs-on-the-node.md). A job is created starting
// with a job.start task for its node; what hostd reports of it (job.start,
// then job.wait every Config.Wait while it runs) moves it to running and
// to one of its final states, and may release its allocation (release:
// on-exit, on-success). job.cancel queues job.stop.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/jobspec"
)

// SystemActor is who releases a job's allocation when the job ends.
const SystemActor = "system:jobs"

// EventJobState tells a job's project members it changed state; the Data
// is the Job.
const EventJobState = api.EventJobState

// Config tunes how controld follows jobs; the zero value is the defaults.
type Config struct {
	// StartWait is how long job.start waits for the job to end before
	// reporting it running (default 100ms: a job that ends at once takes
	// one task, a longer one shows running at once; BenchmarkJobSubmitToRunning
	// measured a p50 of 1076 ms with 1 s).
	StartWait time.Duration
	// Wait is how long one job.start or job.wait task waits for the job
	// to end before reporting it still runs (default 5m: well inside the
	// node task deadline, controld/hosts Tuning.TaskDeadline).
	Wait time.Duration
	// StopGrace is how long job.stop waits after SIGTERM before SIGKILL
	// (default 10s).
	StopGrace time.Duration
	// LogMaxBytes bounds each job's log in the LOGS stream, enforced by
	// hostd where it reads the output (0: hostd's default, 64 MiB).
	LogMaxBytes int64
	// Secrets opens the project secrets a job's env names (nil: a job
	// naming one is refused as unavailable).
	Secrets *secrets.Key
	// LogNext returns the number of the line after the last one the LOGS
	// stream holds of a job's log subject (1 when none): where a retried
	// job's log goes on (retry.go). nil: a retry numbers from 1.
	LogNext func(ctx context.Context, subject string) (int64, error)
}

func (c Config) withDefaults() Config {
	if c.StartWait <= 0 {
		c.StartWait = 100 * time.Millisecond
	}
	if c.Wait <= 0 {
		c.Wait = 5 * time.Minute
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 10 * time.Second
	}
	return c
}

// spec is what the jobs row keeps of a job's request (its spec column).
type spec struct {
	Setup string            `json:"setup,omitempty"`
	Run   string            `json:"run"`
	Env   map[string]string `json:"env,omitempty"`
	// Secrets are the env variables set from project secrets: their
	// names only, the values are never stored with the job.
	Secrets map[string]string `json:"secrets,omitempty"`
	Timeout int64             `json:"timeout_seconds,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	// Image is the digest reference of the job's image, ImageName its
	// catalog name (image.go); empty without one.
	Image     string `json:"image,omitempty"`
	ImageName string `json:"image_name,omitempty"`
}

const jobColumns = `SELECT id, project_id, user_id, allocation_id, coalesce(node_id, ''), name, state, phase, exit_code, signal,
	reason, release, spec, cancel_requested, created_at, started_at, ended_at, task_id, attempt, retries FROM jobs`

// row is a job as read, with what the API does not show.
type row struct {
	api.Job
	spec   spec
	taskID string
}

func scan(r pgx.Row) (row, error) {
	var j row
	var raw []byte
	err := r.Scan(&j.ID, &j.ProjectID, &j.UserID, &j.AllocationID, &j.NodeID, &j.Name, &j.State, &j.Phase, &j.ExitCode,
		&j.Signal, &j.Reason, &j.Release, &raw, &j.Cancelling, &j.CreatedAt, &j.StartedAt, &j.EndedAt, &j.taskID,
		&j.Attempt, &j.Retries)
	if err != nil {
		return j, err
	}
	if err := json.Unmarshal(raw, &j.spec); err != nil {
		return j, fmt.Errorf("job %s spec: %w", j.ID, err)
	}
	j.TimeoutSeconds, j.Workdir = j.spec.Timeout, j.spec.Workdir
	j.Image, j.ImageRef = j.spec.ImageName, j.spec.Image
	for k := range j.spec.Env {
		j.EnvNames = append(j.EnvNames, k)
	}
	for k, name := range j.spec.Secrets {
		j.EnvNames = append(j.EnvNames, k)
		if j.EnvSecrets == nil {
			j.EnvSecrets = map[string]string{}
		}
		j.EnvSecrets[k] = jobspec.SecretPrefix + name
	}
	slices.Sort(j.EnvNames)
	j.Cancelling = j.Cancelling && !api.JobFinal(j.State)
	return j, nil
}

func notFound(id string) error {
	return api.Errorf(api.CodeNotFound, "job %s not found", id).WithHint("see `gpuaas job list`")
}

// load reads a job; lock takes its row lock (FOR UPDATE).
func load(ctx context.Context, q store.Querier, id string, lock bool) (row, error) {
	sql := jobColumns + ` WHERE id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	j, err := scan(q.QueryRow(ctx, sql, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return j, notFound(id)
	}
	if err != nil {
		return j, fmt.Errorf("load job %s: %w", id, err)
	}
	return j, nil
}

// authorize checks the actor may act (want) on the job's project; a job
// of a project they cannot see is not found.
func authorize(ctx context.Context, q store.Querier, actor alloc.Actor, j row, want project.Access) error {
	return project.AuthorizeResource(ctx, q, j.ProjectID, actor.UserID, actor.Role, want, notFound(j.ID))
}

// Get returns a job the actor may see.
func Get(ctx context.Context, q store.Querier, actor alloc.Actor, id string) (api.Job, error) {
	j, err := load(ctx, q, id, false)
	if err != nil {
		return api.Job{}, err
	}
	if err := authorize(ctx, q, actor, j, project.AccessRead); err != nil {
		return api.Job{}, err
	}
	list := []api.Job{j.Job}
	if err := placeInLine(ctx, q, list); err != nil {
		return api.Job{}, err
	}
	j.Job = list[0]
	// The output only here: lists and events stay small.
	if err := q.QueryRow(ctx, `SELECT output, output_bytes FROM jobs WHERE id = $1`, id).Scan(&j.Output, &j.OutputBytes); err != nil {
		return api.Job{}, fmt.Errorf("job %s output: %w", id, err)
	}
	return j.Job, nil
}

// List returns jobs newest first: a project's (req.Project, which the
// actor must be able to read), or else the actor's own.
func List(ctx context.Context, q store.Querier, actor alloc.Actor, req api.JobListRequest) ([]api.Job, error) {
	if req.Limit <= 0 || req.Limit > 500 {
		req.Limit = 100
	}
	sql, args := jobColumns+` WHERE user_id = $1`, []any{actor.UserID}
	if req.Project != "" {
		p, err := project.Authorize(ctx, q, req.Project, actor.UserID, actor.Role, project.AccessRead)
		if err != nil {
			return nil, err
		}
		sql, args = jobColumns+` WHERE project_id = $1`, []any{p.ID}
	}
	if req.AllocationID != "" {
		sql += ` AND allocation_id = $2`
		args = append(args, req.AllocationID)
	}
	rows, err := q.Query(ctx, sql+fmt.Sprintf(` ORDER BY created_at DESC, id LIMIT %d`, req.Limit), args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	out := []api.Job{}
	for rows.Next() {
		j, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j.Job)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, placeInLine(ctx, q, out)
}

// effect audits a change of a job and tells its project's members.
func effect(ctx context.Context, q store.Querier, action string, j api.Job, detail map[string]any) (mutate.Effect, error) {
	users, err := project.MemberIDs(ctx, q, j.ProjectID)
	if err != nil {
		return mutate.Effect{}, err
	}
	if detail == nil {
		detail = map[string]any{}
	}
	detail["allocation_id"], detail["state"] = j.AllocationID, j.State
	return mutate.Effect{
		Audit:  audit.Entry{Action: action, TargetType: "job", TargetID: j.ID, ProjectID: j.ProjectID, Detail: detail},
		Events: []outbox.Event{stateEvent(j, users)},
	}, nil
}

func stateEvent(j api.Job, users []string) outbox.Event {
	return outbox.Event{Kind: EventJobState, Subject: j.ID, ProjectID: j.ProjectID, Users: users, Payload: j}
}
