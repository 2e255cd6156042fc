package api

import (
	"context"
	"time"
)

// Job states (docs/jobs.md): queued while its allocation waits for
// capacity (JobCreateRequest.Queue), starting until hostd reports the
// process started, running until it ends; then one of the four final
// states.
const (
	JobQueued    = "queued"
	JobStarting  = "starting"
	JobRunning   = "running"
	JobSucceeded = "succeeded" // exit code 0
	JobFailed    = "failed"    // non-zero exit, a signal, or setup failed
	JobCancelled = "cancelled" // job.cancel ended it
	JobLost      = "lost"      // the platform lost track of it (Reason says why)
)

// JobFinal reports whether a job in state has ended.
func JobFinal(state string) bool {
	switch state {
	case JobSucceeded, JobFailed, JobCancelled, JobLost:
		return true
	}
	return false
}

// EventJobState tells a job's project members it changed state
// (created, running, ended, being cancelled); the Data is a Job.
const EventJobState = "job.state"

// Job phases: where a job is, or ended.
const (
	JobPhaseSetup = "setup"
	JobPhaseRun   = "run"
	// JobPhaseWorkdir is the check that the job's workdir is there,
	// before setup.
	JobPhaseWorkdir = "workdir"
	// JobPhaseImage is the preparation of a job's container (pull, load,
	// create) when its job.yaml names an image, before the workdir check.
	JobPhaseImage = "image"
)

// JobReasonTimeout starts the reason of a job its timeout ended
// ("timeout: ran longer than 1h0m0s"): the platform ended it.
const JobReasonTimeout = "timeout"

// JobReleaseReason is the reason an allocation released because its job
// ended gets (release: on-exit, on-success).
const JobReleaseReason = "job finished"

// JobCreateRequest starts a job on an active allocation (job.create).
// Env holds values; Secrets the env variables a job.yaml gives as
// secret:NAME (docs/jobs.md "Secrets").
type JobCreateRequest struct {
	AllocationID string            `json:"allocation_id"`
	Name         string            `json:"name,omitempty"`
	Setup        string            `json:"setup,omitempty"`
	Run          string            `json:"run"`
	Env          map[string]string `json:"env,omitempty"`
	// TimeoutSeconds ends the job when it runs longer; 0 is none.
	TimeoutSeconds int64 `json:"timeout_seconds,omitempty"`
	// Release is on-exit (default), keep or on-success.
	Release string `json:"release,omitempty"`

	// Secrets maps env variables to the names of project secrets,
	// resolved by controld in the allocation's project when the job
	// starts and sealed to its node; the values are never stored with
	// the job.
	Secrets map[string]string `json:"secrets,omitempty"`
	// Workdir is the directory setup and run start in, relative to the
	// renter's home (or absolute); empty is the home. `gpuaas run`
	// uploads a job.yaml's workdir and names it here
	// (docs/decisions/0027-workdir-upload.md).
	Workdir string `json:"workdir,omitempty"`
	// Image names a catalog image (name or id) whose container setup and
	// run run in (docs/jobs.md "Images"); empty runs them in the
	// allocation's own environment.
	Image string `json:"image,omitempty"`

	// Queue accepts an allocation that is not active yet (queued for
	// capacity or provisioning): the job is created queued and controld
	// starts it when the allocation becomes active, or ends it when the
	// allocation is given up (docs/jobs.md "Waiting for capacity").
	Queue bool `json:"queue,omitempty"`

	// Retries is how many times a job the platform lost (JobLost: hostd
	// restarted and could not re-attach it, or the node stopped
	// answering) is started again on its allocation, 0 to 10; never after
	// the job's own exit, a timeout or a cancel (docs/jobs.md "Retries").
	Retries int `json:"retries,omitempty"`
}

// Job is a job as job.get and job.list show it. Env values are never
// shown: only the names.
type Job struct {
	ID             string   `json:"id"`
	ProjectID      string   `json:"project_id"`
	UserID         string   `json:"user_id"`
	AllocationID   string   `json:"allocation_id"`
	NodeID         string   `json:"node_id"`
	Name           string   `json:"name,omitempty"`
	State          string   `json:"state"`
	Phase          string   `json:"phase,omitempty"`
	ExitCode       *int     `json:"exit_code,omitempty"`
	Signal         string   `json:"signal,omitempty"`
	Reason         string   `json:"reason,omitempty"`
	Release        string   `json:"release"`
	TimeoutSeconds int64    `json:"timeout_seconds,omitempty"`
	EnvNames       []string `json:"env_names,omitempty"`
	Workdir        string   `json:"workdir,omitempty"`
	// Image is the catalog name of the image the job runs in, ImageRef
	// the digest reference it was resolved to; empty without one.
	Image      string `json:"image,omitempty"`
	ImageRef   string `json:"image_ref,omitempty"`
	Cancelling bool   `json:"cancelling,omitempty"`
	// Output is the end of the job's output once it ended (at most
	// 16 KiB; job.get only, until logs are kept: docs/jobs.md), and
	// OutputBytes how much it wrote in all.
	Output      string     `json:"output,omitempty"`
	OutputBytes int64      `json:"output_bytes,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`

	// EnvSecrets are the env variables set from project secrets, each
	// as "secret:NAME" (the value is never shown).
	EnvSecrets map[string]string `json:"env_secrets,omitempty"`

	// QueuePosition is a queued job's place in line: its allocation's
	// among the requests of its SKU waiting for capacity (1 is next); 0
	// once the allocation is placed, or for a job that is not queued.
	QueuePosition int `json:"queue_position,omitempty"`

	// Attempt counts the job's starts from 1: a lost job retried
	// (Retries) is started again as attempt 2, and so on.
	Attempt int `json:"attempt"`
	// Retries is how many retries the job may have in all.
	Retries int `json:"retries,omitempty"`
}

// JobRef names a job.
type JobRef struct {
	ID string `json:"id"`
}

// JobListRequest filters job.list: the caller's jobs, or a project's
// (Project, or the Gpuaas-Project header) for its members.
type JobListRequest struct {
	Project      string `json:"project,omitempty"`
	AllocationID string `json:"allocation_id,omitempty"`
	Limit        int    `json:"limit,omitempty"`
}

// JobListResponse is job.list's answer, newest first.
type JobListResponse struct {
	Jobs []Job `json:"jobs"`
}

// JobStopReport is what job.stop reports: whether the job was
// running there to be signalled.
type JobStopReport struct {
	JobID    string `json:"job_id"`
	Signaled bool   `json:"signaled"`
}

// JobCreate starts a job on an active allocation.
func (c *Client) JobCreate(ctx context.Context, req JobCreateRequest, opts ...CallOption) (*Job, error) {
	return Do(ctx, c, OpJobCreate, req, opts...)
}

// JobGet returns a job.
func (c *Client) JobGet(ctx context.Context, id string) (*Job, error) {
	return Do(ctx, c, OpJobGet, JobRef{ID: id})
}

// JobList lists jobs.
func (c *Client) JobList(ctx context.Context, req JobListRequest) (*JobListResponse, error) {
	return Do(ctx, c, OpJobList, req)
}

// JobCancel ends a running job.
func (c *Client) JobCancel(ctx context.Context, id string, opts ...CallOption) (*Job, error) {
	return Do(ctx, c, OpJobCancel, JobRef{ID: id}, opts...)
}
