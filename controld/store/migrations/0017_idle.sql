-- Idle auto-release and maximum duration (issue 16, item 1), owned by
-- controld/idle.

-- A project's idle period; no row is off (the default).
CREATE TABLE idle_project_policies (
    project_id           text PRIMARY KEY REFERENCES projects (id),
    idle_release_after_s bigint NOT NULL CHECK (idle_release_after_s >= 0),
    updated_at           timestamptz NOT NULL
);

-- Per allocation: the policy set at create and the activity seen.
-- idle_release_after_s NULL inherits the project's, 0 is off;
-- max_duration_s NULL is none. gate_active_at is the last channel data
-- through a gateway, gpu_active_at the last time one of its GPUs was busy.
-- idle_warned_for is the deadline an idle warning was sent for (a later
-- activity moves the deadline, so a new stretch warns again);
-- max_warned is set once the maximum-duration warning went out.
CREATE TABLE idle_allocations (
    allocation_id        text PRIMARY KEY REFERENCES allocations (id),
    idle_release_after_s bigint CHECK (idle_release_after_s >= 0),
    max_duration_s       bigint CHECK (max_duration_s > 0),
    gate_active_at       timestamptz,
    gpu_active_at        timestamptz,
    idle_warned_for      timestamptz,
    max_warned           boolean NOT NULL DEFAULT false
);
