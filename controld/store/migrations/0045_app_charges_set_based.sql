-- App charges checked as usage and volume charges are (0034,
-- docs/decisions/0038-set-based-ledger.md;
-- docs/decisions/0059-app-prices.md): app_charges' row-level foreign key
-- to app_meters, one RI query per charged window in the accrual, is
-- replaced by the same rule checked once per statement, and an app
-- meter's key is made permanent (it already cannot be deleted or
-- truncated, 0043), so that a meter the check found cannot go away.
CREATE TRIGGER app_meters_keep_key BEFORE UPDATE OF workload_id ON app_meters
    FOR EACH ROW WHEN (NEW.workload_id IS DISTINCT FROM OLD.workload_id)
    EXECUTE FUNCTION billing_refuse_removal('a meter is kept with its charges');

ALTER TABLE app_charges DROP CONSTRAINT app_charges_workload_id_fkey;
CREATE FUNCTION app_charges_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    orphan text;
BEGIN
    SELECT i.workload_id INTO orphan FROM inserted i
        WHERE NOT EXISTS (SELECT FROM app_meters m WHERE m.workload_id = i.workload_id) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'app charge of %: no such meter', orphan
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER app_charges_check AFTER INSERT ON app_charges
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION app_charges_check();
