package api

import (
	"context"
	"time"
)

// EventWorkloadState tells a workload's project members it changed
// state; the Data is the Workload.
const EventWorkloadState = "workload.state"

// WorkloadFinal reports whether a workload's state is one it never leaves.
func WorkloadFinal(state string) bool { return state == WorkloadStopped || state == WorkloadFailed }

// Workload is an image run as a container on an allocation
// (docs/apps.md).
type Workload struct {
	ID           string   `json:"id"`
	ProjectID    string   `json:"project_id"`
	UserID       string   `json:"user_id"`
	AllocationID string   `json:"allocation_id"`
	NodeID       string   `json:"node_id"`
	Name         string   `json:"name"`
	Image        string   `json:"image"`
	ImageID      string   `json:"image_id"`
	Digest       string   `json:"digest"`
	Command      []string `json:"command,omitempty"`
	EnvNames     []string `json:"env_names,omitempty"`
	State        string   `json:"state"`
	// Stopping: a stop was asked for and the node has not reported yet.
	Stopping   bool       `json:"stopping,omitempty"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	Pulled     bool       `json:"pulled,omitempty"`
	LastLines  []string   `json:"last_lines,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	RemovedAt  *time.Time `json:"removed_at,omitempty"`
	ReportedAt *time.Time `json:"reported_at,omitempty"`
	// GPUs is how many GPUs its container has (0: none); its GPU-seconds
	// are these × its running time.
	GPUs int `json:"gpus"`
	// Readiness is its probe, when it has one; ReadyAt when it passed.
	Readiness *WorkloadProbe `json:"readiness,omitempty"`
	ReadyAt   *time.Time     `json:"ready_at,omitempty"`
	// ImageTrust is the image's trust now (not when the workload
	// started): a running workload of an image revoked since keeps
	// running, and says so.
	ImageTrust string `json:"image_trust,omitempty"`
	// AppID is the published app it runs ("" for an image run as is);
	// AppPricePerHourMinor is that app's own price per hour when it was
	// run, charged for its running time on top of its allocation's
	// (docs/apps.md, "Prices").
	AppID                string `json:"app_id,omitempty"`
	AppPricePerHourMinor int64  `json:"app_price_per_hour_minor,omitempty"`
}

// AppRunRequest runs Image (a catalog name or id, promoted and verified:
// the project's own or the platform's) on an active allocation. Name is
// unique on the allocation among workloads not removed (default: the
// image's name). Command, when given, replaces the image's entrypoint
// and command. GPUs is how many of the allocation's GPUs the container
// gets, its first in slot order (0: all of them; docs/apps.md, "GPUs").
type AppRunRequest struct {
	Image        string            `json:"image"`
	AllocationID string            `json:"allocation_id"`
	Name         string            `json:"name,omitempty"`
	Command      []string          `json:"command,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	GPUs         int               `json:"gpus,omitempty"`
	// NoGPUs runs the container without GPU devices (a manifest's gpus:
	// 0); GPUs is then 0.
	NoGPUs bool `json:"no_gpus,omitempty"`
	// ShmBytes is /dev/shm's size in the container (0: podman's default).
	ShmBytes int64 `json:"shm_bytes,omitempty"`
	// Readiness, when set, keeps the workload starting until its probe
	// passes, and fails it when it does not within its deadline
	// (docs/apps.md, "Readiness").
	Readiness *WorkloadProbe `json:"readiness,omitempty"`
	// Mounts are volumes attached to the allocation, bound into the
	// container (workload_mounts.go).
	Mounts []AppMount `json:"mounts,omitempty"`
}

// WorkloadRef names a workload.
type WorkloadRef struct {
	ID string `json:"id"`
}

// AppPsRequest lists workloads: a project's (default: the caller's
// own), an allocation's; All includes removed ones.
type AppPsRequest struct {
	Project      string `json:"project,omitempty"`
	AllocationID string `json:"allocation_id,omitempty"`
	All          bool   `json:"all,omitempty"`
}

// AppPsResponse is app.ps's answer.
type AppPsResponse struct {
	Workloads []Workload `json:"workloads"`
}

// AppLogsRequest asks for a page of a workload's log (app.logs), as
// JobLogsRequest does of a job's: the lines after After, from Cursor,
// written at or after Since; Wait, while the workload runs, waits for a
// first line (at most JobLogsMaxWait).
type AppLogsRequest JobLogsRequest

// AppLogsResponse is a page of a workload's log (its container's stdout
// and stderr, numbered from 1 across hostd restarts): After and Cursor go
// in the next request; Ended says the workload had ended and this page
// holds its last line.
type AppLogsResponse JobLogsResponse

// AppRun runs a catalog image on an active allocation.
func (c *Client) AppRun(ctx context.Context, req AppRunRequest, opts ...CallOption) (*Workload, error) {
	return Do(ctx, c, OpAppRun, req, opts...)
}

// AppPs lists workloads.
func (c *Client) AppPs(ctx context.Context, req AppPsRequest, opts ...CallOption) (*AppPsResponse, error) {
	return Do(ctx, c, OpAppPs, req, opts...)
}

// AppGet returns one workload.
func (c *Client) AppGet(ctx context.Context, id string, opts ...CallOption) (*Workload, error) {
	return Do(ctx, c, OpAppGet, WorkloadRef{ID: id}, opts...)
}

// AppStop stops a workload.
func (c *Client) AppStop(ctx context.Context, id string, opts ...CallOption) (*Workload, error) {
	return Do(ctx, c, OpAppStop, WorkloadRef{ID: id}, opts...)
}

// AppRm removes a workload (stopping it first).
func (c *Client) AppRm(ctx context.Context, id string, opts ...CallOption) (*Workload, error) {
	return Do(ctx, c, OpAppRm, WorkloadRef{ID: id}, opts...)
}

// AppLogs reads a page of a workload's log.
func (c *Client) AppLogs(ctx context.Context, req AppLogsRequest, opts ...CallOption) (*AppLogsResponse, error) {
	return Do(ctx, c, OpAppLogs, req, opts...)
}

// RunsWorkloads reports whether allocations of shape run workloads: bare
// metal, as the allocation's user with rootless podman on the node, and
// slices, the same inside the slice's guest (docs/apps.md, "Slices").
func RunsWorkloads(shape string) bool { return shape == ShapeBaremetal || shape == ShapeGPUSlice }
