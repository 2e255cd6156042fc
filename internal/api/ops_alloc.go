package api

// Endpoints of allocations and the event feed of the user API.
// Declared once here; see endpoint.go.
var (
	// OpAllocCreate is alloc.create: requests an allocation.
	OpAllocCreate = NewMutation[AllocCreateRequest, Allocation](EndpointAllocCreate, LoggedIn)
	// OpAllocGet is alloc.get: returns one allocation.
	OpAllocGet = NewQuery[AllocRef, Allocation](EndpointAllocGet, LoggedIn)
	// OpAllocList is alloc.list: lists allocations.
	OpAllocList = NewQuery[AllocListRequest, AllocListResponse](EndpointAllocList, LoggedIn)
	// OpAllocQuote is alloc.quote: prices req and reports whether it would be placed now, changing nothing (`gpuaas alloc create --dry-run`).
	OpAllocQuote = NewQuery[AllocCreateRequest, AllocQuote](EndpointAllocQuote, LoggedIn)
	// OpAllocRelease is alloc.release: releases an allocation.
	OpAllocRelease = NewMutation[AllocReleaseRequest, Allocation](EndpointAllocRelease, LoggedIn)
	// OpAllocTop is alloc.top: returns the latest telemetry of an allocation's GPUs.
	OpAllocTop = NewQuery[AllocRef, AllocTopResponse](EndpointAllocTop, LoggedIn)
	// OpEventsSince is events.since: calls events.since.
	OpEventsSince = NewQuery[EventsSinceRequest, EventsSinceResponse](EndpointEventsSince, LoggedIn)
)
