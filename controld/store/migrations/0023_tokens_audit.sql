-- Tokens for machines (docs/tokens.md, docs/decisions/0014-tokens-and-audit-chain.md)
-- and the audit trail's hash chain (docs/audit.md).

-- A token acts as a principal of its own: a users row of provider 'token'
-- whose id is the token's id, a member of one project with the token's role.
-- Every existing check (project roles, audit actors, idempotency by actor)
-- then applies to it unchanged.
ALTER TABLE users DROP CONSTRAINT users_provider_check;
ALTER TABLE users ADD CONSTRAINT users_provider_check
    CHECK (provider IN ('local', 'oidc', 'service', 'token'));

CREATE TABLE api_tokens (
    id          text PRIMARY KEY REFERENCES users (id),
    name        text NOT NULL,
    project_id  text NOT NULL REFERENCES projects (id),
    role        text NOT NULL CHECK (role IN ('member', 'viewer')),
    -- SHA-256 of the whole secret: it carries 256 random bits, so a slow
    -- password hash would add nothing but latency to every request.
    secret_hash bytea NOT NULL CHECK (length(secret_hash) = 32),
    created_by  text NOT NULL REFERENCES users (id),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL CHECK (expires_at > created_at),
    revoked_at  timestamptz,
    revoked_by  text REFERENCES users (id)
);
-- A name is unique among a project's tokens that were not revoked.
CREATE UNIQUE INDEX api_tokens_name_key ON api_tokens (project_id, name) WHERE revoked_at IS NULL;
CREATE INDEX api_tokens_project_idx ON api_tokens (project_id, created_at);

-- A token's principal is a member of its own project with its own role and
-- of nothing else, whoever writes project_members (add-member by the
-- principal's email, a role change): the database refuses it.
CREATE FUNCTION project_members_token_scope() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM users u WHERE u.id = NEW.user_id AND u.provider = 'token')
       AND NOT EXISTS (SELECT 1 FROM api_tokens t
                       WHERE t.id = NEW.user_id AND t.project_id = NEW.project_id AND t.role = NEW.role) THEN
        RAISE EXCEPTION 'token % acts only in its own project with its own role', NEW.user_id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER project_members_token_scope BEFORE INSERT OR UPDATE ON project_members
    FOR EACH ROW EXECUTE FUNCTION project_members_token_scope();
