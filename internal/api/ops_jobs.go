package api

// Endpoints of jobs (docs/jobs.md), declared once each (endpoint.go,
// docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointJobCreate = "job.create"
	EndpointJobGet    = "job.get"
	EndpointJobList   = "job.list"
	EndpointJobCancel = "job.cancel"
)

var (
	// OpJobCreate is job.create: starts a job (setup, then run) on an
	// active allocation, as its user, supervised by the node's hostd.
	OpJobCreate = NewMutation[JobCreateRequest, Job](EndpointJobCreate, LoggedIn)
	// OpJobGet is job.get: returns one job, its state, exit code and
	// reason.
	OpJobGet = NewQuery[JobRef, Job](EndpointJobGet, LoggedIn)
	// OpJobList is job.list: lists the caller's jobs, or a project's.
	OpJobList = NewQuery[JobListRequest, JobListResponse](EndpointJobList, LoggedIn)
	// OpJobCancel is job.cancel: ends a running job (SIGTERM, then
	// SIGKILL after a grace period).
	OpJobCancel = NewMutation[JobRef, Job](EndpointJobCancel, LoggedIn)
)
