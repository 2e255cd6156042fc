-- Foundation schema: identity, projects, catalog, nodes and slots,
-- allocations, node tasks, idempotency, audit and the outbox.

CREATE TABLE controld_keys (
    name        text PRIMARY KEY,
    private_key bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id            text PRIMARY KEY,
    email         text NOT NULL,
    name          text NOT NULL DEFAULT '',
    role          text NOT NULL CHECK (role IN ('user', 'operator', 'admin')),
    provider      text NOT NULL CHECK (provider IN ('local', 'oidc')),
    password_hash text,
    oidc_issuer   text,
    oidc_subject  text,
    created_at    timestamptz NOT NULL,
    CHECK ((provider = 'local') = (password_hash IS NOT NULL)),
    CHECK ((provider = 'oidc') = (oidc_subject IS NOT NULL AND oidc_issuer IS NOT NULL))
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));
CREATE UNIQUE INDEX users_oidc_key ON users (oidc_issuer, oidc_subject) WHERE provider = 'oidc';

CREATE TABLE sessions (
    id         text PRIMARY KEY,
    user_id    text NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX sessions_user_idx ON sessions (user_id);

CREATE TABLE projects (
    id         text PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    created_by text NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL
);

CREATE TABLE project_members (
    project_id text NOT NULL REFERENCES projects (id),
    user_id    text NOT NULL REFERENCES users (id),
    role       text NOT NULL CHECK (role IN ('owner', 'member', 'viewer')),
    added_at   timestamptz NOT NULL,
    PRIMARY KEY (project_id, user_id)
);
CREATE INDEX project_members_user_idx ON project_members (user_id);

CREATE TABLE skus (
    id                       text PRIMARY KEY,
    shape                    text NOT NULL CHECK (shape IN ('baremetal', 'gpu_slice')),
    gpu_model                text NOT NULL,
    gpu_counts               int[] NOT NULL CHECK (cardinality(gpu_counts) > 0),
    price_per_gpu_hour_minor bigint NOT NULL CHECK (price_per_gpu_hour_minor >= 0),
    currency                 text NOT NULL DEFAULT 'usd',
    description              text NOT NULL DEFAULT '',
    active                   boolean NOT NULL DEFAULT true
);

CREATE TABLE nodes (
    id                text PRIMARY KEY,
    name              text NOT NULL UNIQUE,
    shape             text NOT NULL CHECK (shape IN ('baremetal', 'gpu_slice')),
    gpu_model         text NOT NULL,
    state             text NOT NULL CHECK (state IN ('ready', 'draining', 'down')),
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    last_heartbeat_at timestamptz
);

CREATE TABLE allocations (
    id          text PRIMARY KEY,
    project_id  text NOT NULL REFERENCES projects (id),
    user_id     text NOT NULL REFERENCES users (id),
    sku_id      text NOT NULL REFERENCES skus (id),
    shape       text NOT NULL,
    gpus        int NOT NULL CHECK (gpus > 0),
    state       text NOT NULL CHECK (state IN ('requested', 'provisioning', 'active', 'releasing',
                                               'released', 'failed', 'release_failed')),
    version     bigint NOT NULL DEFAULT 1,
    queued      boolean NOT NULL DEFAULT false,
    node_id     text REFERENCES nodes (id),
    reason      text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX allocations_project_idx ON allocations (project_id, created_at DESC);
CREATE INDEX allocations_user_idx ON allocations (user_id, created_at DESC);
CREATE INDEX allocations_queue_idx ON allocations (sku_id, created_at) WHERE queued;

-- Every state change of an allocation, for the timeline and for audits of
-- the state machine.
CREATE TABLE allocation_transitions (
    id            bigserial PRIMARY KEY,
    allocation_id text NOT NULL REFERENCES allocations (id),
    from_state    text NOT NULL,
    to_state      text NOT NULL,
    reason        text NOT NULL DEFAULT '',
    actor_id      text NOT NULL,
    at            timestamptz NOT NULL
);
CREATE INDEX allocation_transitions_alloc_idx ON allocation_transitions (allocation_id, id);

CREATE TABLE slots (
    id            text PRIMARY KEY,
    node_id       text NOT NULL REFERENCES nodes (id),
    idx           int NOT NULL,
    gpu_pci       text NOT NULL,
    nvme          text NOT NULL DEFAULT '',
    fabric_vf     text NOT NULL DEFAULT '',
    numa_node     int NOT NULL,
    state         text NOT NULL CHECK (state IN ('pending', 'free', 'reserved', 'disabled')),
    allocation_id text REFERENCES allocations (id),
    UNIQUE (node_id, idx),
    CHECK ((state = 'reserved') = (allocation_id IS NOT NULL))
);
CREATE INDEX slots_free_idx ON slots (node_id, numa_node) WHERE state = 'free';
CREATE INDEX slots_alloc_idx ON slots (allocation_id) WHERE allocation_id IS NOT NULL;

-- The durable queue of work for hostd.
CREATE TABLE node_tasks (
    id            text PRIMARY KEY,
    node_id       text NOT NULL REFERENCES nodes (id),
    allocation_id text REFERENCES allocations (id),
    type          text NOT NULL,
    params        jsonb NOT NULL DEFAULT '{}',
    state         text NOT NULL CHECK (state IN ('pending', 'dispatched', 'accepted', 'running',
                                                 'succeeded', 'failed', 'interrupted', 'expired')),
    attempts      int NOT NULL DEFAULT 0,
    result        jsonb,
    error         text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX node_tasks_pending_idx ON node_tasks (node_id, created_at)
    WHERE state IN ('pending', 'dispatched', 'accepted', 'running');

CREATE TABLE idempotency_keys (
    actor        text NOT NULL,
    key          text NOT NULL,
    endpoint     text NOT NULL,
    request_hash bytea NOT NULL,
    response     jsonb NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (actor, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

CREATE TABLE audit_logs (
    id             bigserial PRIMARY KEY,
    at             timestamptz NOT NULL,
    actor_id       text NOT NULL,
    action         text NOT NULL,
    target_type    text NOT NULL,
    target_id      text NOT NULL,
    project_id     text,
    correlation_id text NOT NULL DEFAULT '',
    idempotency_key text NOT NULL DEFAULT '',
    detail         jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_logs_target_idx ON audit_logs (target_type, target_id);

CREATE TABLE outbox_events (
    id           bigserial PRIMARY KEY,
    kind         text NOT NULL,
    subject      text NOT NULL DEFAULT '',
    project_id   text,
    users        text[] NOT NULL DEFAULT '{}',
    payload      jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'published', 'dead')),
    attempts     int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error   text NOT NULL DEFAULT '',
    published_at timestamptz
);
CREATE INDEX outbox_events_pending_idx ON outbox_events (id) WHERE state = 'pending';

-- Wake the relay as soon as a row commits.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox_events', '');
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
