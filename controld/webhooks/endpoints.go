package webhooks

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Deps are what webhooks' endpoints need of the server.
type Deps struct {
	// DB serves the reads outside a mutation's transaction.
	DB store.Querier
	// Policy is where a webhook may deliver (Settings.Policy).
	Policy Policy
	Now    func() time.Time
}

// Endpoints are a project's webhooks (docs/webhooks.md,
// docs/decisions/0069-domain-endpoints.md): owners add, test and remove
// them and retry dead deliveries; members list them and their deliveries.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpWebhookAdd, h.add),
		endpoint.Query(api.OpWebhookList, h.list),
		endpoint.Mutation(api.OpWebhookRemove, h.remove),
		endpoint.Mutation(api.OpWebhookTest, h.test),
		endpoint.Query(api.OpWebhookDeliveries, h.deliveries),
		endpoint.Mutation(api.OpWebhookRetry, h.retry),
	}
}

type handlers struct{ Deps }

func (h handlers) add(ctx context.Context, r *endpoint.Request, req api.WebhookAddRequest) (endpoint.Work[api.Webhook], error) {
	req.URL = strings.TrimSpace(req.URL)
	if err := h.Policy.CheckURL(req.URL); err != nil {
		return nil, err
	}
	events, err := CheckEvents(req.Events)
	if err != nil {
		return nil, err
	}
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Webhook, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		w, err := Add(ctx, tx, p.ID, req.URL, events, r.Principal.UserID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := webhookEffect(ctx, tx, api.EndpointWebhookAdd, w)
		return &w, eff, err
	}, nil
}

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.WebhookListRequest) (*api.WebhookList, error) {
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	p, err := project.Authorize(ctx, h.DB, ref, r.Principal.UserID, r.Principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	ws, err := List(ctx, h.DB, p.ID)
	if err != nil {
		return nil, err
	}
	return &api.WebhookList{Webhooks: ws}, nil
}

// ownedWebhook returns the webhook id names after checking the caller
// administers its project.
func ownedWebhook(ctx context.Context, q store.Querier, r *endpoint.Request, id string) (api.Webhook, error) {
	if strings.TrimSpace(id) == "" {
		return api.Webhook{}, api.Errorf(api.CodeInvalidArgument, "which webhook? give its id").
			WithHint("see `gpuaas webhook list`")
	}
	w, err := Get(ctx, q, id)
	if err != nil {
		return w, err
	}
	if _, err := project.Authorize(ctx, q, w.ProjectID, r.Principal.UserID, r.Principal.Role, project.AccessAdmin); err != nil {
		return api.Webhook{}, err
	}
	return w, nil
}

func (h handlers) remove(_ context.Context, r *endpoint.Request, req api.WebhookRef) (endpoint.Work[api.Webhook], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Webhook, mutate.Effect, error) {
		if _, err := ownedWebhook(ctx, tx, r, req.ID); err != nil {
			return nil, mutate.Effect{}, err
		}
		w, err := Remove(ctx, tx, req.ID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := webhookEffect(ctx, tx, api.EndpointWebhookRemove, w)
		return &w, eff, err
	}, nil
}

func (h handlers) test(_ context.Context, r *endpoint.Request, req api.WebhookRef) (endpoint.Work[api.WebhookDelivery], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.WebhookDelivery, mutate.Effect, error) {
		w, err := ownedWebhook(ctx, tx, r, req.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		d, err := EnqueueTest(ctx, tx, w, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := deliveryEffect(ctx, tx, api.EndpointWebhookTest, w.ProjectID, d)
		return &d, eff, err
	}, nil
}

func (h handlers) deliveries(ctx context.Context, r *endpoint.Request, req api.WebhookDeliveriesRequest) (*api.WebhookDeliveryList, error) {
	projectID := ""
	if req.Webhook != "" {
		w, err := Get(ctx, h.DB, req.Webhook)
		if err != nil {
			return nil, err
		}
		projectID = w.ProjectID
	} else {
		ref, err := project.Ref(ctx, h.DB, r, req.Project)
		if err != nil {
			return nil, err
		}
		projectID = ref
	}
	p, err := project.Authorize(ctx, h.DB, projectID, r.Principal.UserID, r.Principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	ds, err := Deliveries(ctx, h.DB, p.ID, req.Webhook, req.State, req.Limit)
	if err != nil {
		return nil, err
	}
	return &api.WebhookDeliveryList{Deliveries: ds}, nil
}

func (h handlers) retry(_ context.Context, r *endpoint.Request, req api.WebhookDeliveryRef) (endpoint.Work[api.WebhookDelivery], error) {
	if strings.TrimSpace(req.ID) == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which delivery? give its id").
			WithHint("see `gpuaas webhook deliveries --state dead`")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.WebhookDelivery, mutate.Effect, error) {
		projectID, err := DeliveryProject(ctx, tx, req.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if _, err := project.Authorize(ctx, tx, projectID, r.Principal.UserID, r.Principal.Role, project.AccessAdmin); err != nil {
			return nil, mutate.Effect{}, err
		}
		d, err := Retry(ctx, tx, req.ID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := deliveryEffect(ctx, tx, api.EndpointWebhookRetry, projectID, d)
		return &d, eff, err
	}, nil
}

// webhookEffect is the audit row of a webhook's change and its
// webhook.changed event to the project's members (never the secret).
func webhookEffect(ctx context.Context, tx pgx.Tx, action string, w api.Webhook) (mutate.Effect, error) {
	users, err := project.MemberIDs(ctx, tx, w.ProjectID)
	if err != nil {
		return mutate.Effect{}, err
	}
	w.Secret = ""
	return mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "webhook", TargetID: w.ID, ProjectID: w.ProjectID,
			Detail: map[string]any{"url": w.URL, "events": w.Events}},
		Events: []outbox.Event{{Kind: api.EventWebhook, Subject: w.ID, ProjectID: w.ProjectID, Users: users, Payload: w}},
	}, nil
}

// deliveryEffect is the audit row of a delivery queued by hand (a test or
// a retry) and its webhook.delivery event to the project's members.
func deliveryEffect(ctx context.Context, tx pgx.Tx, action, projectID string, d api.WebhookDelivery) (mutate.Effect, error) {
	users, err := project.MemberIDs(ctx, tx, projectID)
	if err != nil {
		return mutate.Effect{}, err
	}
	return mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "webhook_delivery", TargetID: d.ID, ProjectID: projectID,
			Detail: map[string]any{"webhook_id": d.WebhookID, "event_kind": d.EventKind}},
		Events: []outbox.Event{{Kind: api.EventWebhookDelivery, Subject: d.WebhookID, ProjectID: projectID, Users: users,
			Payload: d}},
	}, nil
}
