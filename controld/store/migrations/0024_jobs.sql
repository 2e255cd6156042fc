-- Jobs (docs/jobs.md, docs/decisions/0015-jobs-on-the-node.md): a command
-- run unattended on an allocation, supervised by the node's hostd. One row
-- per job; its node tasks (job.start, job.wait, job.cancel) are in
-- node_tasks, task_id naming the one that follows it now.
CREATE TABLE jobs (
    id            text PRIMARY KEY,
    project_id    text NOT NULL REFERENCES projects (id),
    user_id       text NOT NULL REFERENCES users (id),
    allocation_id text NOT NULL REFERENCES allocations (id),
    node_id       text NOT NULL REFERENCES nodes (id),
    name          text NOT NULL DEFAULT '',
    -- setup, run, env values (never secrets' values), timeout.
    spec          jsonb NOT NULL,
    release       text NOT NULL CHECK (release IN ('on-exit', 'keep', 'on-success')),
    state         text NOT NULL CHECK (state IN ('starting', 'running', 'succeeded', 'failed', 'cancelled', 'lost')),
    -- phase is where it is or ended: setup or run.
    phase         text NOT NULL DEFAULT '',
    exit_code     int,
    signal        text NOT NULL DEFAULT '',
    reason        text NOT NULL DEFAULT '',
    task_id       text NOT NULL DEFAULT '',
    cancel_requested boolean NOT NULL DEFAULT false,
    -- The end of the job's output (16 KiB at most), until logs are kept.
    output        text NOT NULL DEFAULT '',
    output_bytes  bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    started_at    timestamptz,
    ended_at      timestamptz,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX jobs_project_idx ON jobs (project_id, created_at DESC);
CREATE INDEX jobs_task_idx ON jobs (task_id);
-- One unfinished job per allocation: a second waits for the first to end.
CREATE UNIQUE INDEX jobs_one_open_per_allocation ON jobs (allocation_id) WHERE state IN ('starting', 'running');
