-- The zero-trust bus (docs/architecture.md, "Trust model"): controld decides every
-- NATS connection through the auth callout.

-- Service identities that authenticate to NATS with an nkey: gateways
-- (sshgate) and operators (natscli, read-only system monitoring). Only the
-- public key is stored; the seed never leaves the machine that made it.
CREATE TABLE bus_identities (
    public_key  text PRIMARY KEY CHECK (public_key ~ '^U[A-Z2-7]{55}$'),
    kind        text NOT NULL CHECK (kind IN ('gateway', 'operator')),
    name        text NOT NULL,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);
CREATE INDEX bus_identities_name ON bus_identities (name);

-- Every connection the callout let in, so a revocation can close it
-- (NATS's KICK by server id and client id). Rows outlive nothing: they are
-- pruned once their connection's authorization has expired.
CREATE TABLE bus_connections (
    server_id    text NOT NULL,
    client_id    bigint NOT NULL,
    kind         text NOT NULL,
    principal    text NOT NULL,
    session_id   text,
    conn_key     text,
    source       text NOT NULL DEFAULT '',
    connected_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (server_id, client_id)
);
CREATE INDEX bus_connections_session ON bus_connections (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX bus_connections_principal ON bus_connections (principal);
CREATE INDEX bus_connections_conn_key ON bus_connections (conn_key) WHERE conn_key IS NOT NULL;
CREATE INDEX bus_connections_expires ON bus_connections (expires_at);

-- hostd authenticates with its enrolled key.
CREATE INDEX nodes_public_key ON nodes (public_key);
