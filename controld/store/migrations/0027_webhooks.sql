-- Webhooks (controld/webhooks, docs/webhooks.md): a project subscribes an
-- https URL to event kinds; each event of those kinds becomes a delivery,
-- sent signed until the receiver answers 2xx or its attempts run out.

CREATE TABLE webhooks (
    id         text PRIMARY KEY,
    project_id text NOT NULL REFERENCES projects (id),
    url        text NOT NULL,
    events     text[] NOT NULL CHECK (cardinality(events) > 0),
    -- secret signs deliveries (HMAC-SHA256); readable by controld's role
    -- only, like its signing keys (controld_keys).
    secret     text NOT NULL,
    created_by text NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL,
    removed_at timestamptz
);
CREATE INDEX webhooks_project ON webhooks (project_id) WHERE removed_at IS NULL;

CREATE TABLE webhook_deliveries (
    -- id is the delivery id receivers drop repeats by: the same on every
    -- attempt.
    id              text PRIMARY KEY,
    webhook_id      text NOT NULL REFERENCES webhooks (id),
    -- event_seq is the event's EVENTS stream sequence (0 for a test
    -- delivery): an event redelivered by JetStream makes no second row.
    event_seq       bigint NOT NULL CHECK (event_seq >= 0),
    event_kind      text NOT NULL,
    body            bytea NOT NULL,
    state           text NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts        int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_status     int NOT NULL DEFAULT 0,
    last_error      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    delivered_at    timestamptz
);
CREATE UNIQUE INDEX webhook_deliveries_event ON webhook_deliveries (webhook_id, event_seq) WHERE event_seq > 0;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at DESC);
