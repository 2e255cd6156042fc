package api

// Endpoints of allocations and the event feed of the user API. Each is
// declared here once: its name (Subject(name) is its subject; audit rows
// and logs name it so) and its descriptor, with its request and response
// types, access level and kind (endpoint.go, docs/decisions/0013-endpoint-
// descriptors.md).
const (
	EndpointAllocCreate  = "alloc.create"
	EndpointAllocGet     = "alloc.get"
	EndpointAllocList    = "alloc.list"
	EndpointAllocQuote   = "alloc.quote"
	EndpointAllocRelease = "alloc.release"
	EndpointAllocTop     = "alloc.top"
	EndpointEventsSince  = "events.since"
)

var (
	// OpAllocCreate is alloc.create: requests an allocation.
	OpAllocCreate = NewMutation[AllocCreateRequest, Allocation](EndpointAllocCreate, LoggedIn)
	// OpAllocGet is alloc.get: returns one allocation.
	OpAllocGet = NewQuery[AllocRef, Allocation](EndpointAllocGet, LoggedIn)
	// OpAllocList is alloc.list: lists allocations.
	OpAllocList = NewQuery[AllocListRequest, AllocListResponse](EndpointAllocList, LoggedIn)
	// OpAllocQuote is alloc.quote: prices req and reports whether it would be
	// placed now, changing nothing (`gpuaas alloc create --dry-run`).
	OpAllocQuote = NewQuery[AllocCreateRequest, AllocQuote](EndpointAllocQuote, LoggedIn)
	// OpAllocRelease is alloc.release: releases an allocation.
	OpAllocRelease = NewMutation[AllocReleaseRequest, Allocation](EndpointAllocRelease, LoggedIn)
	// OpAllocTop is alloc.top: returns the latest telemetry of an allocation's
	// GPUs.
	OpAllocTop = NewQuery[AllocRef, AllocTopResponse](EndpointAllocTop, LoggedIn)
	// OpEventsSince is events.since: returns the caller's events after a
	// sequence, for `watch` to replay what it missed.
	OpEventsSince = NewQuery[EventsSinceRequest, EventsSinceResponse](EndpointEventsSince, LoggedIn)
)
