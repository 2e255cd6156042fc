package api

// Endpoints of jobs (docs/jobs.md), declared once each (endpoint.go,
// docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointJobCreate = "job.create"
	EndpointJobGet    = "job.get"
	EndpointJobList   = "job.list"
	EndpointJobCancel = "job.cancel"
	EndpointJobLogs   = "job.logs"
)

var (
	// OpJobCreate is job.create: starts a job (setup, then run) on an
	// active allocation, as its user, supervised by the node's hostd; with
	// queue, on one in line or provisioning it is queued and starts when
	// the allocation is active.
	OpJobCreate = NewMutation[JobCreateRequest, Job](EndpointJobCreate, LoggedIn)
	// OpJobGet is job.get: returns one job, its state, exit code and
	// reason.
	OpJobGet = NewQuery[JobRef, Job](EndpointJobGet, LoggedIn)
	// OpJobList is job.list: lists the caller's jobs, or a project's.
	OpJobList = NewQuery[JobListRequest, JobListResponse](EndpointJobList, LoggedIn)
	// OpJobCancel is job.cancel: ends a running job (SIGTERM, then
	// SIGKILL after a grace period); a queued one at once, its allocation
	// released unless its release is keep.
	OpJobCancel = NewMutation[JobRef, Job](EndpointJobCancel, LoggedIn)
	// OpJobLogs is job.logs: a page of a job's stdout and stderr, numbered
	// lines with their times, after the lines already seen; with wait, it
	// waits for a first line while the job runs (follow: repeat the call).
	// A project viewer may read it; users never read JetStream themselves.
	OpJobLogs = NewQuery[JobLogsRequest, JobLogsResponse](EndpointJobLogs, LoggedIn)
)
