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

-- The audit trail is hash-chained per stream, as the ledger is per account
-- (docs/audit.md): a project's rows form one stream (stream = project id),
-- rows about no project the platform's (stream = ''). Each row carries its
-- seq in its stream, the previous row's hash and its own, so that
-- `gpuaas ops audit verify` (controld/audit.Verify, which recomputes the
-- hashes in Go) finds a row edited, deleted or inserted behind controld's
-- back, and names it.
ALTER TABLE audit_logs ADD COLUMN stream text, ADD COLUMN seq bigint, ADD COLUMN prev_hash text, ADD COLUMN hash text;

-- audit_hash is a row's chain hash: hex SHA-256 over its fields as UTF-8
-- text separated by NUL bytes (which text cannot contain), numbers in
-- decimal, at in Unix microseconds, project_id '' when there is none and
-- detail as jsonb's text (canonical: keys sorted, no insignificant space).
-- controld/audit.RowHash computes the same in Go.
CREATE FUNCTION audit_hash(prev_hash text, seq bigint, stream text, at timestamptz, actor_id text, action text,
                           target_type text, target_id text, project_id text, correlation_id text,
                           idempotency_key text, detail jsonb)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT encode(sha256(
        convert_to(prev_hash, 'UTF8') || '\x00'::bytea ||
        convert_to(seq::text, 'UTF8') || '\x00'::bytea ||
        convert_to(stream, 'UTF8') || '\x00'::bytea ||
        convert_to((extract(epoch FROM at) * 1000000)::bigint::text, 'UTF8') || '\x00'::bytea ||
        convert_to(actor_id, 'UTF8') || '\x00'::bytea ||
        convert_to(action, 'UTF8') || '\x00'::bytea ||
        convert_to(target_type, 'UTF8') || '\x00'::bytea ||
        convert_to(target_id, 'UTF8') || '\x00'::bytea ||
        convert_to(coalesce(project_id, ''), 'UTF8') || '\x00'::bytea ||
        convert_to(correlation_id, 'UTF8') || '\x00'::bytea ||
        convert_to(idempotency_key, 'UTF8') || '\x00'::bytea ||
        convert_to(detail::text, 'UTF8')), 'hex')
$$;

-- Rows written before this migration are chained in id order.
DO $$
DECLARE
    r record;
    tails jsonb := '{}';
    s text;
    n bigint;
    prev text;
BEGIN
    FOR r IN SELECT * FROM audit_logs ORDER BY id LOOP
        s := coalesce(r.project_id, '');
        n := coalesce((tails -> s ->> 'seq')::bigint, 0) + 1;
        prev := coalesce(tails -> s ->> 'hash', '');
        UPDATE audit_logs SET stream = s, seq = n, prev_hash = prev,
            hash = audit_hash(prev, n, s, r.at, r.actor_id, r.action, r.target_type, r.target_id, r.project_id,
                              r.correlation_id, r.idempotency_key, r.detail)
            WHERE id = r.id RETURNING hash INTO prev;
        tails := jsonb_set(tails, ARRAY[s], jsonb_build_object('seq', n, 'hash', prev));
    END LOOP;
END $$;
ALTER TABLE audit_logs ALTER COLUMN stream SET NOT NULL, ALTER COLUMN seq SET NOT NULL,
    ALTER COLUMN prev_hash SET NOT NULL, ALTER COLUMN hash SET NOT NULL;
-- A stream can neither fork nor repeat a seq.
CREATE UNIQUE INDEX audit_logs_stream_seq_key ON audit_logs (stream, seq);
CREATE INDEX audit_logs_at_idx ON audit_logs (at);
CREATE INDEX audit_logs_actor_idx ON audit_logs (actor_id, id);

-- audit_logs_chain links each new row to its stream's last one. An
-- advisory lock per stream, held to the end of the inserting transaction,
-- appends one stream's rows one at a time; the lookup after it runs in a
-- snapshot of its own (READ COMMITTED, which every writer of audit rows
-- uses), so it sees the row a transaction it waited for committed.
-- audit.Write's callers stay as they were: the columns are the trigger's.
CREATE FUNCTION audit_logs_chain() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    last_seq  bigint;
    last_hash text;
BEGIN
    NEW.stream := coalesce(NEW.project_id, '');
    PERFORM pg_advisory_xact_lock(hashtextextended('audit_logs:' || NEW.stream, 0));
    SELECT a.seq, a.hash INTO last_seq, last_hash FROM audit_logs a
        WHERE a.stream = NEW.stream ORDER BY a.seq DESC LIMIT 1;
    NEW.seq := coalesce(last_seq, 0) + 1;
    NEW.prev_hash := coalesce(last_hash, '');
    NEW.hash := audit_hash(NEW.prev_hash, NEW.seq, NEW.stream, NEW.at, NEW.actor_id, NEW.action, NEW.target_type,
                           NEW.target_id, NEW.project_id, NEW.correlation_id, NEW.idempotency_key, NEW.detail);
    RETURN NEW;
END $$;
CREATE TRIGGER audit_logs_chain BEFORE INSERT ON audit_logs FOR EACH ROW EXECUTE FUNCTION audit_logs_chain();

-- The audit trail is append-only, for everyone including its owner.
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % is not allowed: the audit trail is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_logs_append_only BEFORE UPDATE OR DELETE ON audit_logs
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_logs_no_truncate BEFORE TRUNCATE ON audit_logs
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
REVOKE UPDATE, DELETE, TRUNCATE ON audit_logs FROM gpuaas_app;
