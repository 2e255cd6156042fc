package controld

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/webhooks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// webhookEndpoints are a project's webhooks (controld/webhooks,
// docs/webhooks.md): owners add, test and remove them and retry dead
// deliveries; members list them and their deliveries.
func (s *Server) webhookEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpWebhookAdd, s.webhookAdd),
		query(s, api.OpWebhookList, s.webhookList),
		mutation(s, api.OpWebhookRemove, s.webhookRemove),
		mutation(s, api.OpWebhookTest, s.webhookTest),
		query(s, api.OpWebhookDeliveries, s.webhookDeliveries),
		mutation(s, api.OpWebhookRetry, s.webhookRetry),
	}
}

func (s *Server) webhookAdd(ctx context.Context, c *call, req api.WebhookAddRequest) (work[api.Webhook], error) {
	req.URL = strings.TrimSpace(req.URL)
	if err := s.cfg.Webhooks.Policy.CheckURL(req.URL); err != nil {
		return nil, err
	}
	events, err := webhooks.CheckEvents(req.Events)
	if err != nil {
		return nil, err
	}
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Webhook, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, c.principal.UserID, c.principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		w, err := webhooks.Add(ctx, tx, p.ID, req.URL, events, c.principal.UserID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := webhookEffect(ctx, tx, api.EndpointWebhookAdd, w)
		return &w, eff, err
	}, nil
}

func (s *Server) webhookList(ctx context.Context, c *call, req api.WebhookListRequest) (*api.WebhookList, error) {
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	p, err := project.Authorize(ctx, s.pool, ref, c.principal.UserID, c.principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	ws, err := webhooks.List(ctx, s.pool, p.ID)
	if err != nil {
		return nil, err
	}
	return &api.WebhookList{Webhooks: ws}, nil
}

// ownedWebhook returns the webhook id names after checking the caller
// administers its project.
func ownedWebhook(ctx context.Context, q store.Querier, c *call, id string) (api.Webhook, error) {
	if strings.TrimSpace(id) == "" {
		return api.Webhook{}, api.Errorf(api.CodeInvalidArgument, "which webhook? give its id").
			WithHint("see `gpuaas webhook list`")
	}
	w, err := webhooks.Get(ctx, q, id)
	if err != nil {
		return w, err
	}
	if _, err := project.Authorize(ctx, q, w.ProjectID, c.principal.UserID, c.principal.Role, project.AccessAdmin); err != nil {
		return api.Webhook{}, err
	}
	return w, nil
}

func (s *Server) webhookRemove(_ context.Context, c *call, req api.WebhookRef) (work[api.Webhook], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Webhook, mutate.Effect, error) {
		if _, err := ownedWebhook(ctx, tx, c, req.ID); err != nil {
			return nil, mutate.Effect{}, err
		}
		w, err := webhooks.Remove(ctx, tx, req.ID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := webhookEffect(ctx, tx, api.EndpointWebhookRemove, w)
		return &w, eff, err
	}, nil
}

func (s *Server) webhookTest(_ context.Context, c *call, req api.WebhookRef) (work[api.WebhookDelivery], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.WebhookDelivery, mutate.Effect, error) {
		w, err := ownedWebhook(ctx, tx, c, req.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		d, err := webhooks.EnqueueTest(ctx, tx, w, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := deliveryEffect(ctx, tx, api.EndpointWebhookTest, w.ProjectID, d)
		return &d, eff, err
	}, nil
}

func (s *Server) webhookDeliveries(ctx context.Context, c *call, req api.WebhookDeliveriesRequest) (*api.WebhookDeliveryList, error) {
	projectID := ""
	if req.Webhook != "" {
		w, err := webhooks.Get(ctx, s.pool, req.Webhook)
		if err != nil {
			return nil, err
		}
		projectID = w.ProjectID
	} else {
		ref, err := s.projectRef(ctx, c, req.Project)
		if err != nil {
			return nil, err
		}
		projectID = ref
	}
	p, err := project.Authorize(ctx, s.pool, projectID, c.principal.UserID, c.principal.Role, project.AccessRead)
	if err != nil {
		return nil, err
	}
	ds, err := webhooks.Deliveries(ctx, s.pool, p.ID, req.Webhook, req.State, req.Limit)
	if err != nil {
		return nil, err
	}
	return &api.WebhookDeliveryList{Deliveries: ds}, nil
}

func (s *Server) webhookRetry(_ context.Context, c *call, req api.WebhookDeliveryRef) (work[api.WebhookDelivery], error) {
	if strings.TrimSpace(req.ID) == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which delivery? give its id").
			WithHint("see `gpuaas webhook deliveries --state dead`")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.WebhookDelivery, mutate.Effect, error) {
		projectID, err := webhooks.DeliveryProject(ctx, tx, req.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if _, err := project.Authorize(ctx, tx, projectID, c.principal.UserID, c.principal.Role, project.AccessAdmin); err != nil {
			return nil, mutate.Effect{}, err
		}
		d, err := webhooks.Retry(ctx, tx, req.ID, s.now())
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
