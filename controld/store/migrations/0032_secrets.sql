-- Project secrets (controld/secrets, docs/jobs.md "Secrets",
-- docs/decisions/0028-project-secrets.md): values a job's env names as
-- secret:NAME. The value is kept only sealed with controld's secrets key
-- (AES-256-GCM, the project and name as associated data); key_id names
-- the key that sealed it, digest is a short fingerprint shown by
-- secret.list (HMAC-SHA256 under the key, so it reveals nothing of the
-- value without the key).

CREATE TABLE project_secrets (
    project_id text NOT NULL REFERENCES projects (id),
    name       text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    key_id     text NOT NULL,
    nonce      bytea NOT NULL,
    ciphertext bytea NOT NULL,
    size       int NOT NULL CHECK (size >= 0),
    digest     text NOT NULL,
    set_by     text NOT NULL REFERENCES users (id),
    set_at     timestamptz NOT NULL,
    PRIMARY KEY (project_id, name)
);
