package api

// Endpoints of apps: workloads on allocations (docs/apps.md), declared
// once each (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointAppRun  = "app.run"
	EndpointAppPs   = "app.ps"
	EndpointAppGet  = "app.get"
	EndpointAppStop = "app.stop"
	EndpointAppRm   = "app.rm"
	EndpointAppLogs = "app.logs"
)

var (
	// OpAppRun is app.run: runs a catalog image (promoted and verified,
	// the project's own or the platform's) as a container on an active
	// allocation, as its user, with rootless podman on the node.
	OpAppRun = NewMutation[AppRunRequest, Workload](EndpointAppRun, LoggedIn)
	// OpAppPs is app.ps: lists workloads, a project's or an allocation's.
	OpAppPs = NewQuery[AppPsRequest, AppPsResponse](EndpointAppPs, LoggedIn)
	// OpAppGet is app.get: returns one workload, its state, exit code,
	// reason and last log lines.
	OpAppGet = NewQuery[WorkloadRef, Workload](EndpointAppGet, LoggedIn)
	// OpAppStop is app.stop: stops a workload (SIGTERM, then SIGKILL
	// after a grace period); its container stays until app.rm or release
	// (a priced app's goes with its image when it ended).
	OpAppStop = NewMutation[WorkloadRef, Workload](EndpointAppStop, LoggedIn)
	// OpAppRm is app.rm: stops a workload if it runs and removes its
	// container; its name is free again.
	OpAppRm = NewMutation[WorkloadRef, Workload](EndpointAppRm, LoggedIn)
	// OpAppLogs is app.logs: a page of a workload's stdout and stderr,
	// numbered lines from the LOGS stream, as job.logs (authorized as
	// app.get; long-poll with wait).
	OpAppLogs = NewQuery[AppLogsRequest, AppLogsResponse](EndpointAppLogs, LoggedIn)
)
