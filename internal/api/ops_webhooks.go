package api

// Endpoint names of webhooks (docs/webhooks.md).
const (
	EndpointWebhookAdd        = "webhook.add"
	EndpointWebhookList       = "webhook.list"
	EndpointWebhookRemove     = "webhook.rm"
	EndpointWebhookTest       = "webhook.test"
	EndpointWebhookDeliveries = "webhook.deliveries"
	EndpointWebhookRetry      = "webhook.retry"
)

var (
	// OpWebhookAdd is webhook.add: a project owner subscribes an https URL
	// to event kinds; the reply carries the signing secret, shown once.
	OpWebhookAdd = NewSecretMutation[WebhookAddRequest, Webhook](EndpointWebhookAdd, LoggedIn)
	// OpWebhookList is webhook.list: a project's webhooks (members).
	OpWebhookList = NewQuery[WebhookListRequest, WebhookList](EndpointWebhookList, LoggedIn)
	// OpWebhookRemove is webhook.rm: a project owner removes a webhook;
	// its undelivered deliveries are dropped.
	OpWebhookRemove = NewMutation[WebhookRef, Webhook](EndpointWebhookRemove, LoggedIn)
	// OpWebhookTest is webhook.test: a project owner queues a webhook.test
	// delivery, signed like any other.
	OpWebhookTest = NewMutation[WebhookRef, WebhookDelivery](EndpointWebhookTest, LoggedIn)
	// OpWebhookDeliveries is webhook.deliveries: a project's deliveries,
	// newest first, with their state, attempts and last error (members).
	OpWebhookDeliveries = NewQuery[WebhookDeliveriesRequest, WebhookDeliveryList](EndpointWebhookDeliveries, LoggedIn)
	// OpWebhookRetry is webhook.retry: a project owner makes a dead
	// delivery pending again; it is sent once more with the same id.
	OpWebhookRetry = NewMutation[WebhookDeliveryRef, WebhookDelivery](EndpointWebhookRetry, LoggedIn)
)
