-- sshgate: the SSH certificate authorities, the gateway's service
-- principal, and the index of recorded terminal sessions.

-- Keys of the three SSH CAs (user, host, internal). Every key that is not
-- retired is trusted; the one marked active signs. The private key is an
-- OpenSSH PEM block, encrypted with controld's CA passphrase when one is
-- configured; like controld_keys it must be readable only by controld's
-- database role. A retired key loses its private half: it can never sign
-- again, and nothing trusts it.
CREATE TABLE ssh_ca_keys (
    id           text PRIMARY KEY,          -- SHA256 fingerprint, "SHA256:..."
    ca           text NOT NULL CHECK (ca IN ('user', 'host', 'internal')),
    public_key   text NOT NULL,             -- authorized_keys format
    private_key  bytea,                     -- OpenSSH PEM; NULL once retired
    active       boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL,
    activated_at timestamptz,               -- when it (last) became the signing key
    retired_at   timestamptz,
    CHECK (NOT active OR (retired_at IS NULL AND activated_at IS NOT NULL)),
    CHECK (retired_at IS NOT NULL OR private_key IS NOT NULL)
);
-- One signing key per CA. Replicas racing to create the first key insert
-- with ON CONFLICT on this index, so exactly one wins.
CREATE UNIQUE INDEX ssh_ca_keys_active_key ON ssh_ca_keys (ca) WHERE active;
CREATE INDEX ssh_ca_keys_trusted_idx ON ssh_ca_keys (ca) WHERE retired_at IS NULL;

-- Service principals (sshgate) are users of provider 'service': they have
-- no password and cannot log in; an administrator issues their tokens.
-- The gateway role is reserved to them.
ALTER TABLE users DROP CONSTRAINT users_role_check;
ALTER TABLE users ADD CONSTRAINT users_role_check
    CHECK (role IN ('user', 'operator', 'admin', 'gateway'));
ALTER TABLE users DROP CONSTRAINT users_provider_check;
ALTER TABLE users ADD CONSTRAINT users_provider_check
    CHECK (provider IN ('local', 'oidc', 'service'));
ALTER TABLE users ADD CONSTRAINT users_gateway_is_service
    CHECK (role <> 'gateway' OR provider = 'service');

-- One SSH session through the gateway (shell, exec, sftp or a port
-- forward). PTY sessions name their asciicast recording in the
-- terminal-recordings object store bucket.
CREATE TABLE terminal_sessions (
    id            text PRIMARY KEY,
    user_id       text NOT NULL REFERENCES users (id),
    allocation_id text NOT NULL REFERENCES allocations (id),
    kind          text NOT NULL CHECK (kind IN ('shell', 'exec', 'sftp', 'forward')),
    command       text NOT NULL DEFAULT '',
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz,
    bytes         bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    exit_status   int,
    recording     text NOT NULL DEFAULT '',
    gateway       text NOT NULL DEFAULT ''   -- which gateway instance served it
);
CREATE INDEX terminal_sessions_user_idx ON terminal_sessions (user_id, started_at DESC);
CREATE INDEX terminal_sessions_alloc_idx ON terminal_sessions (allocation_id, started_at DESC);
CREATE INDEX terminal_sessions_started_idx ON terminal_sessions (started_at DESC);

-- The host key of each node's terminal server, as the node reports it, so
-- sshgate can check it is talking to that node's hostd.
ALTER TABLE nodes ADD COLUMN terminal_host_key text NOT NULL DEFAULT '';
