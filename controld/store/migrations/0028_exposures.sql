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

-- One-time links into an exposure for a browser (expose.link, redeemed by
-- the gateway's front with gate.redeem_link): a code, stored hashed, that
-- sets the front's cookie bound to the login that minted it, then goes to
-- path on the exposure's own host.
CREATE TABLE exposure_links (
    code_hash   bytea PRIMARY KEY,
    exposure_id text NOT NULL REFERENCES exposures (id),
    user_id     text NOT NULL REFERENCES users (id),
    session_id  text NOT NULL,
    path        text NOT NULL CHECK (path LIKE '/%'),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX exposure_links_expiry ON exposure_links (expires_at);
