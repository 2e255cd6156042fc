-- Billing: the append-only ledger of each project's account, the meters
-- of active allocations and the usage windows charged from them, and the
-- database role controld does its normal work as.

-- One account per project. balance_minor, entries and last_hash are a
-- cache of the ledger kept by the ledger_entries_chain trigger in the
-- inserting transaction; `gpuaas ops ledger verify` checks them against
-- the entries.
CREATE TABLE billing_accounts (
    project_id                  text PRIMARY KEY REFERENCES projects (id),
    currency                    text NOT NULL DEFAULT 'usd',
    balance_minor               bigint NOT NULL DEFAULT 0,
    entries                     bigint NOT NULL DEFAULT 0,
    last_hash                   text NOT NULL DEFAULT '',
    -- NULL: the configured default threshold.
    low_balance_threshold_minor bigint CHECK (low_balance_threshold_minor >= 0),
    -- Set when the low-balance warning went out; cleared when the balance
    -- is back at or above the threshold, so each crossing warns once.
    low_balance_warned          boolean NOT NULL DEFAULT false,
    -- When the balance was first seen at or below zero; cleared by a credit.
    depleted_at                 timestamptz,
    created_at                  timestamptz NOT NULL DEFAULT now()
);

-- The ledger. Money in integer minor units: credits > 0, debits < 0.
-- (kind, reference) is unique: an allocation's usage window, a Stripe
-- event, an operator action is booked once. Entries of one account form
-- a hash chain in seq order (see ledger_hash).
CREATE TABLE ledger_entries (
    id           bigserial PRIMARY KEY,
    project_id   text NOT NULL REFERENCES projects (id),
    seq          bigint NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('topup', 'usage', 'refund', 'adjustment')),
    reference    text NOT NULL CHECK (reference <> ''),
    amount_minor bigint NOT NULL,
    currency     text NOT NULL DEFAULT 'usd',
    memo         text NOT NULL DEFAULT '',
    actor_id     text NOT NULL,
    created_at   timestamptz NOT NULL,
    prev_hash    text NOT NULL,
    hash         text NOT NULL,
    UNIQUE (kind, reference),
    UNIQUE (project_id, seq),
    CHECK (CASE kind WHEN 'topup' THEN amount_minor > 0
                     WHEN 'adjustment' THEN amount_minor <> 0
                     ELSE amount_minor < 0 END)
);

-- ledger_hash is the chain hash of one entry: hex SHA-256 over its fields
-- as UTF-8 text separated by NUL bytes (which text cannot contain, so the
-- encoding is unambiguous), numbers in decimal, created_at in Unix
-- microseconds. controld/billing computes the same in Go to verify.
CREATE FUNCTION ledger_hash(prev_hash text, seq bigint, project_id text, kind text, reference text,
                            amount_minor bigint, currency text, memo text, actor_id text, created_at timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT encode(sha256(
        convert_to(prev_hash, 'UTF8') || '\x00'::bytea ||
        convert_to(seq::text, 'UTF8') || '\x00'::bytea ||
        convert_to(project_id, 'UTF8') || '\x00'::bytea ||
        convert_to(kind, 'UTF8') || '\x00'::bytea ||
        convert_to(reference, 'UTF8') || '\x00'::bytea ||
        convert_to(amount_minor::text, 'UTF8') || '\x00'::bytea ||
        convert_to(currency, 'UTF8') || '\x00'::bytea ||
        convert_to(memo, 'UTF8') || '\x00'::bytea ||
        convert_to(actor_id, 'UTF8') || '\x00'::bytea ||
        convert_to((extract(epoch FROM created_at) * 1000000)::bigint::text, 'UTF8')), 'hex')
$$;

-- ledger_entries_chain links each new entry to its account's last one. It
-- locks the account row, so the entries of one account are appended one
-- at a time, in seq order, whatever the statement (one Append or the
-- accrual's batch). An entry whose (kind, reference) is already booked is
-- skipped (the row is not inserted), which makes every booking
-- idempotent; the unique constraint stays as the last line of defence.
CREATE FUNCTION ledger_entries_chain() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    acct billing_accounts%ROWTYPE;
BEGIN
    SELECT * INTO acct FROM billing_accounts WHERE project_id = NEW.project_id FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO billing_accounts (project_id, currency, created_at)
            VALUES (NEW.project_id, NEW.currency, NEW.created_at) ON CONFLICT DO NOTHING;
        SELECT * INTO acct FROM billing_accounts WHERE project_id = NEW.project_id FOR UPDATE;
    END IF;
    IF EXISTS (SELECT 1 FROM ledger_entries WHERE kind = NEW.kind AND reference = NEW.reference) THEN
        RETURN NULL;
    END IF;
    IF NEW.currency <> acct.currency THEN
        RAISE EXCEPTION 'ledger entry in % for an account in %', NEW.currency, acct.currency
            USING ERRCODE = 'check_violation';
    END IF;
    NEW.seq := acct.entries + 1;
    NEW.prev_hash := acct.last_hash;
    NEW.hash := ledger_hash(NEW.prev_hash, NEW.seq, NEW.project_id, NEW.kind, NEW.reference,
                            NEW.amount_minor, NEW.currency, NEW.memo, NEW.actor_id, NEW.created_at);
    UPDATE billing_accounts SET entries = NEW.seq, last_hash = NEW.hash,
        balance_minor = balance_minor + NEW.amount_minor
        WHERE project_id = NEW.project_id;
    RETURN NEW;
END $$;
CREATE TRIGGER ledger_entries_chain BEFORE INSERT ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_chain();

-- The ledger is append-only, for everyone including its owner.
CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % is not allowed: the ledger is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();

-- A meter runs while an allocation is active: controld/alloc starts it on
-- the transition to active and stops it when the allocation leaves
-- active. The price is fixed when it starts.
CREATE TABLE billing_meters (
    allocation_id            text PRIMARY KEY REFERENCES allocations (id),
    project_id               text NOT NULL REFERENCES projects (id),
    sku_id                   text NOT NULL,
    gpus                     int NOT NULL CHECK (gpus > 0),
    price_per_gpu_hour_minor bigint NOT NULL CHECK (price_per_gpu_hour_minor >= 0),
    currency                 text NOT NULL,
    started_at               timestamptz NOT NULL,
    stopped_at               timestamptz,
    CHECK (stopped_at IS NULL OR stopped_at >= started_at)
);
CREATE INDEX billing_meters_running_idx ON billing_meters (project_id) WHERE stopped_at IS NULL;

-- One charged window of one allocation. (allocation_id, window_start) is
-- unique, so a retried or concurrent accrual charges a window once; the
-- next window starts where the last one ended. start_seconds and
-- end_seconds count whole seconds since the meter started.
CREATE TABLE usage_charges (
    allocation_id text NOT NULL REFERENCES billing_meters (allocation_id),
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    start_seconds bigint NOT NULL,
    end_seconds   bigint NOT NULL,
    amount_minor  bigint NOT NULL CHECK (amount_minor >= 0),
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (allocation_id, window_start),
    CHECK (window_end > window_start AND end_seconds >= start_seconds)
);
CREATE TRIGGER usage_charges_append_only BEFORE UPDATE OR DELETE ON usage_charges
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER usage_charges_no_truncate BEFORE TRUNCATE ON usage_charges
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();

-- Allocations already active when billing arrives are metered from when
-- they became active.
INSERT INTO billing_meters (allocation_id, project_id, sku_id, gpus, price_per_gpu_hour_minor, currency, started_at)
SELECT a.id, a.project_id, a.sku_id, a.gpus, s.price_per_gpu_hour_minor, s.currency,
       coalesce((SELECT max(t.at) FROM allocation_transitions t
                 WHERE t.allocation_id = a.id AND t.to_state = 'active'), a.updated_at)
FROM allocations a JOIN skus s ON s.id = a.sku_id
WHERE a.state = 'active';

-- gpuaas_app is the role controld does its normal work as (it sets this
-- role on every pooled connection; migrations run as the connecting
-- role, the owner). Roles are cluster-wide, so several databases of one
-- cluster share it. It may read and write every table except the ledger
-- tables, which it may only read and append to.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gpuaas_app') THEN
        CREATE ROLE gpuaas_app NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created meanwhile by a migration of another database
END $$;
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'gpuaas_app', 'MEMBER') THEN
        EXECUTE format('GRANT gpuaas_app TO %I', current_user);
    END IF;
END $$;
GRANT USAGE ON SCHEMA public TO gpuaas_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO gpuaas_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO gpuaas_app;
-- Tables of later migrations get the same grants; a later append-only
-- table must revoke UPDATE and DELETE itself.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO gpuaas_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO gpuaas_app;
REVOKE UPDATE, DELETE, TRUNCATE ON ledger_entries, usage_charges FROM gpuaas_app;
REVOKE ALL ON schema_version FROM gpuaas_app;
