package tui

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"

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

// Verdict is controld's answer to a dry-run create. The JSON names are
// this package's reading of the dry-run reply another branch adds
// (price_per_hour, fits, queue position, balance/runway); align them with
// the final api type when wiring it.
type Verdict struct {
	Fits              bool   `json:"fits"`
	PricePerHourMinor int64  `json:"price_per_hour_minor"`
	Currency          string `json:"currency"`
	QueuePosition     int    `json:"queue_position,omitempty"`
	BalanceMinor      *int64 `json:"balance_minor,omitempty"`
	RunwayHours       *int64 `json:"runway_hours,omitempty"`
	Reason            string `json:"reason,omitempty"`
}

// Balance is the caller's prepaid balance in minor units.
type Balance struct {
	Minor    int64
	Currency string
}

// apiBackend is Backend over the typed API client. The endpoints other
// branches add (alloc.create with dry_run, billing.balance) are reached
// here only, so wiring their final wire types is a change to this file.
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

// dryRunRequest is alloc.create with dry_run set. controld rejects
// unknown fields, so a server without dry-run support answers
// invalid_argument naming the field instead of creating anything.
type dryRunRequest struct {
	api.AllocCreateRequest
	DryRun bool `json:"dry_run"`
}

func (b *apiBackend) DryRun(ctx context.Context, req api.AllocCreateRequest) (*Verdict, error) {
	var v struct {
		Verdict
		// Fits is a pointer here so that a reply without it (not a
		// verdict at all) is told apart from "does not fit".
		Fits *bool `json:"fits"`
	}
	err := b.c.Mutate(ctx, api.EndpointAllocCreate, dryRunRequest{AllocCreateRequest: req, DryRun: true}, &v)
	if err != nil {
		if unsupported(err) || (errors.Is(err, api.ErrInvalidArgument) && strings.Contains(err.Error(), "dry_run")) {
			return nil, ErrUnsupported
		}
		return nil, err
	}
	if v.Fits == nil {
		return nil, ErrUnsupported
	}
	out := v.Verdict
	out.Fits = *v.Fits
	return &out, nil
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

// endpointBillingBalance is the ledger's balance endpoint, answered by
// controlds that have billing.
const endpointBillingBalance = "billing.balance"

func (b *apiBackend) Balance(ctx context.Context) (*Balance, error) {
	var resp struct {
		BalanceMinor *int64 `json:"balance_minor"`
		Currency     string `json:"currency"`
	}
	if err := b.c.Call(ctx, endpointBillingBalance, nil, &resp); err != nil {
		if unsupported(err) {
			return nil, ErrUnsupported
		}
		return nil, err
	}
	if resp.BalanceMinor == nil {
		return nil, ErrUnsupported
	}
	return &Balance{Minor: *resp.BalanceMinor, Currency: resp.Currency}, nil
}

// unsupported reports whether err means the endpoint is not there: no
// service answers its subject, or controld does not know it.
func unsupported(err error) bool {
	return errors.Is(err, api.ErrNotFound) ||
		(errors.Is(err, api.ErrUnavailable) && strings.Contains(err.Error(), "no responders"))
}

// eventBuffer is how many events may wait for the dashboard; past it they
// are dropped and the periodic refresh catches up.
const eventBuffer = 256

func (b *apiBackend) Events(ctx context.Context, userID string) (<-chan api.Event, error) {
	return subscribeEvents(ctx, b.c.Conn(), userID)
}

func subscribeEvents(ctx context.Context, nc *nats.Conn, userID string) (<-chan api.Event, error) {
	ch := make(chan api.Event, eventBuffer)
	sub, err := nc.Subscribe(api.UserEventWildcard(userID), func(m *nats.Msg) {
		var ev api.Event
		if json.Unmarshal(m.Data, &ev) != nil {
			return
		}
		select {
		case ch <- ev:
		default: // full: the next refresh shows the change
		}
	})
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		_ = sub.Unsubscribe()
	}()
	return ch, nil
}
