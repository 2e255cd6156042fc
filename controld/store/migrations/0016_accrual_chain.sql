-- Accrual in set-based SQL (issue 14, item 2). An accrual window books one
-- ledger entry per running meter; chaining each of them in the row trigger
-- (an account lock, an index lookup of the account's last entry and a hash,
-- one plpgsql call per row) made a window of 100,000 allocations take a
-- minute. The accrual now links its entries itself (controld/billing
-- computes seq, prev_hash and hash under the accounts' locks) and inserts
-- them in one COPY per batch of accounts; the database checks the whole
-- statement at once instead of computing row by row.

-- ledger_entries_chain now runs only for entries that come without a hash
-- (Append, a meter's final window): those it chains exactly as before.
DROP TRIGGER ledger_entries_chain ON ledger_entries;
CREATE TRIGGER ledger_entries_chain BEFORE INSERT ON ledger_entries
    FOR EACH ROW WHEN (NEW.hash = '') EXECUTE FUNCTION ledger_entries_chain();

-- ledger_entries_check checks every entry a statement inserted, chained
-- by the row trigger or by the inserter, once per statement and in sets:
-- each account exists in the entries' currency; each account's new entries
-- have consecutive seqs following its last entry before them (or starting
-- at 1 with an empty prev_hash), each prev_hash is the hash of the entry
-- before, and each hash is ledger_hash of the entry's fields. With the
-- unique (project_id, seq) a chain can neither fork nor skip, whoever
-- inserts; a statement that breaks any of it fails whole.
-- ledger_hash's body calls convert_to, which is STABLE: declared IMMUTABLE
-- the planner may not inline it, and a call per row costs 60 µs through
-- the SQL function executor. STABLE is the truth and lets it inline; the
-- hash itself is unchanged.
ALTER FUNCTION ledger_hash(text, bigint, text, text, text, bigint, text, text, text, timestamptz) STABLE;

-- work_mem: the check sorts the statement's entries (a batch of 50,000
-- from the accrual) and should not spill them to disk.
CREATE FUNCTION ledger_entries_check() RETURNS trigger LANGUAGE plpgsql
SET work_mem = '64MB' AS $$
DECLARE
    bad record;
BEGIN
    SELECT i.project_id, i.currency INTO bad FROM (SELECT DISTINCT project_id, currency FROM inserted) i
        LEFT JOIN billing_accounts a ON a.project_id = i.project_id
        WHERE a.project_id IS NULL OR a.currency <> i.currency LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'ledger entry in % for an account in another currency or none (%)', bad.currency, bad.project_id
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT c.project_id, c.seq INTO bad FROM (
        SELECT i.*, row_number() OVER w AS n, lag(i.seq) OVER w AS prev_seq, lag(i.hash) OVER w AS want_prev
        FROM inserted i WINDOW w AS (PARTITION BY i.project_id ORDER BY i.seq)) c
        WHERE c.hash IS DISTINCT FROM ledger_hash(c.prev_hash, c.seq, c.project_id, c.kind, c.reference,
                                                  c.amount_minor, c.currency, c.memo, c.actor_id, c.created_at)
           OR (c.n > 1 AND (c.seq <> c.prev_seq + 1 OR c.prev_hash <> c.want_prev))
           OR (c.n = 1 AND (c.seq < 1 OR c.prev_hash IS DISTINCT FROM CASE WHEN c.seq = 1 THEN '' ELSE
                   (SELECT e.hash FROM ledger_entries e WHERE e.project_id = c.project_id AND e.seq = c.seq - 1) END))
        LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'ledger entry % of % does not continue its account''s hash chain', bad.seq, bad.project_id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER ledger_entries_check AFTER INSERT ON ledger_entries
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_check();

-- The next window of a meter starts where its last one ended: the primary
-- key carries window_end and end_seconds, so finding them reads the index
-- alone.
ALTER TABLE usage_charges DROP CONSTRAINT usage_charges_pkey;
ALTER TABLE usage_charges ADD CONSTRAINT usage_charges_pkey PRIMARY KEY (allocation_id, window_start) INCLUDE (window_end, end_seconds);
