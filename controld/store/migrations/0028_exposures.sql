-- Exposures (controld/exposures, docs/expose.md): a port of an allocation
-- served over HTTPS by the gateway's front at https://<port>-<allocation>.<apps domain>,
-- to its creator, its project's members or the public, until it expires,
-- is removed or its allocation is released.

CREATE TABLE exposures (
    id            text PRIMARY KEY,
    project_id    text NOT NULL REFERENCES projects (id),
    allocation_id text NOT NULL REFERENCES allocations (id),
    port          int NOT NULL CHECK (port BETWEEN 1024 AND 65535),
    share         text NOT NULL CHECK (share IN ('me', 'project', 'public')),
    name          text NOT NULL DEFAULT '',
    expires_at    timestamptz NOT NULL,
    created_by    text NOT NULL REFERENCES users (id),
    created_at    timestamptz NOT NULL,
    removed_at    timestamptz,
    -- ended says why it ended: removed, released or expired.
    ended         text NOT NULL DEFAULT '' CHECK (ended IN ('', 'removed', 'released', 'expired'))
);
-- One live exposure per port of an allocation (one host name, one route).
CREATE UNIQUE INDEX exposures_port ON exposures (allocation_id, port) WHERE removed_at IS NULL;
CREATE INDEX exposures_project ON exposures (project_id) WHERE removed_at IS NULL;
