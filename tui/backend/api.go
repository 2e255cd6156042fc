package backend

import (
	"context"
	"errors"

	"github.com/gpuaas/gpuaas/internal/api"
)

// apiBackend is Backend over the typed API client. Optional endpoints
// (alloc.quote, billing.balance) map "not there" to ErrUnsupported here, so
// the dashboard still works against an older controld.
type apiBackend struct {
	c *api.Client
}

// New returns the Backend over c.
func New(c *api.Client) Backend { return &apiBackend{c: c} }

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

func (b *apiBackend) AllocTop(ctx context.Context, id string) (*api.AllocTopResponse, error) {
	top, err := b.c.AllocTop(ctx, id)
	if errors.Is(err, api.ErrNoResponders) {
		return nil, ErrUnsupported
	}
	return top, err
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
