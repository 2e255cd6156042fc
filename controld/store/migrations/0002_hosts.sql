-- hostd: enrollment, node identity and health, the task dispatcher's
-- bookkeeping, and task progress for allocation timelines.

CREATE TABLE enrollment_tokens (
    id          text PRIMARY KEY,
    node_name   text NOT NULL,
    shape       text NOT NULL CHECK (shape IN ('baremetal', 'gpu_slice')),
    token_hash  bytea NOT NULL UNIQUE,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    node_id     text REFERENCES nodes (id)
);

ALTER TABLE nodes
    ADD COLUMN public_key bytea,
    ADD COLUMN health jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN terminal_addr text NOT NULL DEFAULT '',
    ADD COLUMN hostd_version text NOT NULL DEFAULT '';

ALTER TABLE nodes DROP CONSTRAINT nodes_state_check;
ALTER TABLE nodes ADD CONSTRAINT nodes_state_check
    CHECK (state IN ('enrolled', 'ready', 'draining', 'down'));

ALTER TABLE node_tasks
    ADD COLUMN dispatched_at   timestamptz,
    ADD COLUMN accepted_at     timestamptz,
    ADD COLUMN finished_at     timestamptz,
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN expires_at      timestamptz,
    ADD COLUMN phase           text NOT NULL DEFAULT '';

-- Phase-by-phase progress reported by hostd.
CREATE TABLE node_task_events (
    id         bigserial PRIMARY KEY,
    task_id    text NOT NULL REFERENCES node_tasks (id),
    at         timestamptz NOT NULL,
    phase      text NOT NULL,
    status     text NOT NULL CHECK (status IN ('started', 'done', 'failed', 'skipped', 'cleanup')),
    elapsed_ms bigint NOT NULL DEFAULT 0,
    message    text NOT NULL DEFAULT ''
);
CREATE INDEX node_task_events_task_idx ON node_task_events (task_id, id);

-- Wake the dispatcher as soon as a task commits.
CREATE FUNCTION node_tasks_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('node_tasks', '');
    RETURN NULL;
END $$;
CREATE TRIGGER node_tasks_notify AFTER INSERT ON node_tasks
    FOR EACH STATEMENT EXECUTE FUNCTION node_tasks_notify();

-- Each slot's management MAC and IP, proposed by discovery.
ALTER TABLE slots
    ADD COLUMN mac text NOT NULL DEFAULT '',
    ADD COLUMN ip  text NOT NULL DEFAULT '';

-- What a slice VM of each SKU gets per GPU, and the image it boots.
ALTER TABLE skus
    ADD COLUMN vcpus_per_gpu      int NOT NULL DEFAULT 8 CHECK (vcpus_per_gpu > 0),
    ADD COLUMN memory_mib_per_gpu int NOT NULL DEFAULT 65536 CHECK (memory_mib_per_gpu > 0),
    ADD COLUMN image              text NOT NULL DEFAULT '',
    ADD COLUMN image_sha256       text NOT NULL DEFAULT '';
