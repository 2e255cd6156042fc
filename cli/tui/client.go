package tui

import (
	"context"
	"errors"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Backend is what the dashboard needs of controld. It is an interface so
// that Update can be tested by feeding messages, with no server; apiBackend
// implements it over the real API client.
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
	// Events delivers the events fanned out to userID until ctx ends.
	Events(ctx context.Context, userID string) (<-chan api.Event, error)
}

// ErrUnsupported is returned by optional Backend calls the server does not
// answer (an older controld, or one without billing).
var ErrUnsupported = errors.New("not supported by this server")

// Verdict is controld's answer to a dry-run create (alloc.quote): the
// price per hour, whether it fits now or its place in line, and the
// balance's runway at that price.
type Verdict = api.AllocQuote

// Balance is the caller's prepaid balance in minor units.
type Balance struct {
	Minor    int64
	Currency string
}

// apiBackend is Backend over the typed API client. Optional endpoints
// (alloc.quote, billing.balance) map "not there" to ErrUnsupported here, so
// the dashboard still works against an older controld.
type apiBackend struct {
	c *api.Client
}

// NewBackend returns the Backend over c.
func NewBackend(c *api.Client) Backend { return &apiBackend{c: c} }

func (b *apiBackend) Whoami(ctx context.Context) (*api.WhoamiResponse, error) { return b.c.Whoami(ctx) }

func (b *apiBackend) ListAllocs(ctx context.Context) ([]api.Allocation, error) {
	resp, err := b.c.AllocList(ctx, api.AllocListRequest{All: true})
	if err != nil {
		return nil, err
	}
	return resp.Allocations, nil
}

func (b *apiBackend) GetAlloc(ctx context.Context, id string) (*api.Allocation, error) {
	return b.c.AllocGet(ctx, id)
}

func (b *apiBackend) ListCatalog(ctx context.Context) ([]api.SKU, error) {
	resp, err := b.c.CatalogList(ctx)
	if err != nil {
		return nil, err
	}
	return resp.SKUs, nil
}

func (b *apiBackend) ListProjects(ctx context.Context) ([]api.Project, error) {
	resp, err := b.c.ProjectList(ctx)
	if err != nil {
		return nil, err
	}
	return resp.Projects, nil
}

func (b *apiBackend) CreateAlloc(ctx context.Context, req api.AllocCreateRequest) (*api.Allocation, error) {
	return b.c.AllocCreate(ctx, req)
}

func (b *apiBackend) DryRun(ctx context.Context, req api.AllocCreateRequest) (*Verdict, error) {
	q, err := b.c.AllocQuote(ctx, req)
	if errors.Is(err, api.ErrNoResponders) {
		return nil, ErrUnsupported
	}
	return q, err
}

func (b *apiBackend) ReleaseAlloc(ctx context.Context, id string) (*api.Allocation, error) {
	return b.c.AllocRelease(ctx, api.AllocReleaseRequest{ID: id})
}

func (b *apiBackend) ListNodes(ctx context.Context) ([]api.Node, error) {
	resp, err := b.c.NodeList(ctx)
	if err != nil {
		return nil, err
	}
	return resp.Nodes, nil
}

func (b *apiBackend) Balance(ctx context.Context) (*Balance, error) {
	resp, err := b.c.BillingBalance(ctx, api.BillingRequest{})
	if err != nil {
		if errors.Is(err, api.ErrNoResponders) {
			return nil, ErrUnsupported
		}
		return nil, err
	}
	return &Balance{Minor: resp.BalanceMinor, Currency: resp.Currency}, nil
}

func (b *apiBackend) Events(ctx context.Context, userID string) (<-chan api.Event, error) {
	return b.c.SubscribeEvents(ctx, userID)
}
