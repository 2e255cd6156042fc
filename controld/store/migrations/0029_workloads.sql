-- Workloads (docs/apps.md, docs/decisions/0021-workloads-on-the-node.md): a
-- catalog image run as a rootless container on an allocation by its node's
-- hostd. The node task that follows it now (workload.start, workload.status,
-- workload.stop) is task_id in node_tasks.
CREATE TABLE workloads (
    id            text PRIMARY KEY,
    project_id    text NOT NULL REFERENCES projects (id),
    user_id       text NOT NULL REFERENCES users (id),
    allocation_id text NOT NULL REFERENCES allocations (id),
    node_id       text NOT NULL REFERENCES nodes (id),
    name          text NOT NULL,
    image_id      text NOT NULL REFERENCES images (id),
    image_name    text NOT NULL,
    -- REPOSITORY@sha256:…, as the catalog had it at app.run.
    image_ref     text NOT NULL,
    digest        text NOT NULL,
    -- command (argv) and env values (never shown, names are).
    spec          jsonb NOT NULL,
    state         text NOT NULL CHECK (state IN ('pending', 'pulling', 'starting', 'running', 'stopping', 'stopped', 'failed')),
    exit_code     int,
    reason        text NOT NULL DEFAULT '',
    pulled        boolean NOT NULL DEFAULT false,
    -- The last lines of its output the node reported (16 KiB at most).
    last_lines    text NOT NULL DEFAULT '',
    reported_at   timestamptz,
    task_id       text NOT NULL DEFAULT '',
    stop_requested boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL,
    started_at    timestamptz,
    ended_at      timestamptz,
    removed_at    timestamptz,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX workloads_project_idx ON workloads (project_id, created_at DESC);
CREATE INDEX workloads_allocation_idx ON workloads (allocation_id);
CREATE INDEX workloads_task_idx ON workloads (task_id);
-- A name is unique on its allocation among workloads not removed.
CREATE UNIQUE INDEX workloads_name_per_allocation ON workloads (allocation_id, name) WHERE removed_at IS NULL;
