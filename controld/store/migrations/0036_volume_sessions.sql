-- Volume sessions (docs/volumes.md, "Data without a GPU";
-- docs/decisions/0037-volume-sessions.md): `sftp <volume-id>@gateway`
-- attaches a volume to an sftp session instead of an allocation. The
-- session is named by the fingerprint of the ticket key the gateway
-- asked for (session_key), by its user and since when; controld/volumes
-- owns the columns as it owns the table.
ALTER TABLE volumes
    ADD COLUMN session_key  text,
    ADD COLUMN session_by text,
    ADD COLUMN session_at   timestamptz;

-- Attached means attached to one allocation or to one session, never both.
-- 0025's unnamed table check "(state = 'attached') = (allocation_id IS
-- NOT NULL)" is found by what it says, not by the name Postgres gave it.
DO $$
DECLARE c text;
BEGIN
    SELECT conname INTO STRICT c FROM pg_constraint
        WHERE conrelid = 'volumes'::regclass AND contype = 'c'
          AND pg_get_constraintdef(oid) LIKE '%attached%allocation_id IS NOT NULL%';
    EXECUTE format('ALTER TABLE volumes DROP CONSTRAINT %I', c);
END $$;
ALTER TABLE volumes ADD CONSTRAINT volumes_attached_check
    CHECK ((state = 'attached') = (allocation_id IS NOT NULL OR session_key IS NOT NULL));
ALTER TABLE volumes ADD CONSTRAINT volumes_one_holder_check
    CHECK (allocation_id IS NULL OR session_key IS NULL);
ALTER TABLE volumes ADD CONSTRAINT volumes_session_check
    CHECK ((session_key IS NULL) = (session_by IS NULL) AND (session_key IS NULL) = (session_at IS NULL));
