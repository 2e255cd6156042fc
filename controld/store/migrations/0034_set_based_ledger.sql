-- A set-based ledger (docs/decisions/0038-set-based-ledger.md): the
-- accrual's statements do no per-row trigger work. Since 0016 the accrual
-- chains its entries in Go and the database checks each statement's
-- entries in sets (ledger_entries_check); what was left per row were the
-- foreign keys' own triggers, one RI query per inserted row: on
-- usage_charges (to billing_meters), on ledger_entries (to projects) and
-- on volume_charges (to volume_meters), a third of the accrual's database
-- time in a window of 100,000 allocations. Each is replaced by the same
-- rule checked once per statement, and the rows they referenced are made
-- permanent, so that what a statement found cannot go away after it.

-- refuse_removal refuses a statement that would take away rows that
-- billing's records refer to: a meter priced the charges that name it,
-- an account holds its project's entries. TG_ARGV[0] says which.
CREATE FUNCTION billing_refuse_removal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % is not allowed: %', TG_OP, TG_TABLE_NAME, TG_ARGV[0]
        USING ERRCODE = 'restrict_violation';
END $$;

-- Meters are kept with the charges they priced (nothing deletes one: a
-- stopped meter stays, with its stopped_at); their key never changes.
CREATE TRIGGER billing_meters_keep BEFORE DELETE ON billing_meters
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_removal('a meter is kept with its charges');
CREATE TRIGGER billing_meters_keep_key BEFORE UPDATE OF allocation_id ON billing_meters
    FOR EACH ROW WHEN (NEW.allocation_id IS DISTINCT FROM OLD.allocation_id)
    EXECUTE FUNCTION billing_refuse_removal('a meter is kept with its charges');
CREATE TRIGGER billing_meters_no_truncate BEFORE TRUNCATE ON billing_meters
    FOR EACH STATEMENT EXECUTE FUNCTION billing_refuse_removal('a meter is kept with its charges');
CREATE TRIGGER volume_meters_keep BEFORE DELETE ON volume_meters
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_removal('a meter is kept with its charges');
CREATE TRIGGER volume_meters_keep_key BEFORE UPDATE OF meter_id ON volume_meters
    FOR EACH ROW WHEN (NEW.meter_id IS DISTINCT FROM OLD.meter_id)
    EXECUTE FUNCTION billing_refuse_removal('a meter is kept with its charges');
CREATE TRIGGER volume_meters_no_truncate BEFORE TRUNCATE ON volume_meters
    FOR EACH STATEMENT EXECUTE FUNCTION billing_refuse_removal('a meter is kept with its charges');
-- An account lives as long as its ledger, which is forever; its
-- project_id references projects, so an account's project cannot go
-- either.
CREATE TRIGGER billing_accounts_keep BEFORE DELETE ON billing_accounts
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_removal('an account is kept with its ledger');
CREATE TRIGGER billing_accounts_keep_key BEFORE UPDATE OF project_id ON billing_accounts
    FOR EACH ROW WHEN (NEW.project_id IS DISTINCT FROM OLD.project_id)
    EXECUTE FUNCTION billing_refuse_removal('an account is kept with its ledger');
CREATE TRIGGER billing_accounts_no_truncate BEFORE TRUNCATE ON billing_accounts
    FOR EACH STATEMENT EXECUTE FUNCTION billing_refuse_removal('an account is kept with its ledger');

-- ledger_entries.project_id: ledger_entries_check (0016) already refuses
-- a statement with an entry whose account does not exist (or is in
-- another currency), and an account's project_id references projects; an
-- account is permanent, so every entry's project exists as long as the
-- entry does. The foreign key's per-row check added nothing but its cost.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_project_id_fkey;

-- usage_charges.allocation_id and volume_charges.meter_id: every charge a
-- statement inserted must name a meter, checked once for the statement
-- (an anti-join through the meters' primary key). Meters are permanent,
-- so a meter the check found stays; a meter another transaction has not
-- committed is not found, as the foreign key would not find it either.
ALTER TABLE usage_charges DROP CONSTRAINT usage_charges_allocation_id_fkey;
CREATE FUNCTION usage_charges_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    orphan text;
BEGIN
    SELECT i.allocation_id INTO orphan FROM inserted i
        WHERE NOT EXISTS (SELECT FROM billing_meters m WHERE m.allocation_id = i.allocation_id) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'usage charge of %: no such meter', orphan
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER usage_charges_check AFTER INSERT ON usage_charges
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION usage_charges_check();

ALTER TABLE volume_charges DROP CONSTRAINT volume_charges_meter_id_fkey;
CREATE FUNCTION volume_charges_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    orphan text;
BEGIN
    SELECT i.meter_id INTO orphan FROM inserted i
        WHERE NOT EXISTS (SELECT FROM volume_meters m WHERE m.meter_id = i.meter_id) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'volume charge of %: no such meter', orphan
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER volume_charges_check AFTER INSERT ON volume_charges
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION volume_charges_check();
