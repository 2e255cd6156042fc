// Package backend is what the dashboard needs of controld: the Backend
// interface its components call, the types of its answers, and the
// implementation over the typed API client.
package backend

import (
	"context"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Backend is what the dashboard needs of controld. It is an interface so
// that the dashboard's Update can be tested by feeding messages, with no
// server; New implements it over the real API client.
type Backend interface {
	Whoami(ctx context.Context) (*api.WhoamiResponse, error)
	ListAllocs(ctx context.Context) ([]api.Allocation, error)
	// GetAlloc returns one allocation with its provisioning timeline.
	GetAlloc(ctx context.Context, id string) (*api.Allocation, error)
	ListCatalog(ctx context.Context) ([]api.SKU, error)
	ListProjects(ctx context.Context) ([]api.Project, error)
	CreateAlloc(ctx context.Context, req api.AllocCreateRequest) (*api.Allocation, error)
	// DryRun asks controld what creating req would do without doing it.
	// ErrUnsupported: the server cannot answer that.
	DryRun(ctx context.Context, req api.AllocCreateRequest) (*Verdict, error)
	ReleaseAlloc(ctx context.Context, id string) (*api.Allocation, error)
	ListNodes(ctx context.Context) ([]api.Node, error)
	// Balance is the caller's prepaid balance. ErrUnsupported: the server
	// has no billing endpoint.
	Balance(ctx context.Context) (*Balance, error)
	// AllocTop is the latest telemetry of an allocation's GPUs.
	// ErrUnsupported: the server has no alloc.top.
	AllocTop(ctx context.Context, id string) (*api.AllocTopResponse, error)
	// Events delivers the events fanned out to userID until ctx ends.
	Events(ctx context.Context, userID string) (<-chan api.Event, error)

	// Jobs and workloads (work.go).
	Work
}

// Verdict is controld's answer to a dry-run create (alloc.quote): the
// price per hour, whether it fits now or its place in line, and the
// balance's runway at that price.
type Verdict = api.AllocQuote

// Balance is the caller's prepaid balance in minor units.
type Balance struct {
	Minor    int64
	Currency string
}

// RequestTimeout bounds each Backend call made for the dashboard.
const RequestTimeout = 10 * time.Second

// Call runs one Backend call with RequestTimeout.
func Call[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	return fn(ctx)
}
