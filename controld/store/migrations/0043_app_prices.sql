-- An app's own price per hour (docs/apps.md, "Prices";
-- docs/decisions/0059-app-prices.md). Operators set it on a platform app
-- (a project's own apps cost nothing of their own). A workload of the app
-- copies it when it is run; while it runs, an app meter (controld/billing
-- owns app_meters and app_charges) charges it in the accrual windows of
-- the allocation meters, a window at a time, once per (workload,
-- window_start), as a ledger entry of kind app. Its allocation's release
-- stops it: it is charged through its allocation, never beyond it.
ALTER TABLE apps ADD COLUMN price_per_hour_minor bigint NOT NULL DEFAULT 0
    CHECK (price_per_hour_minor >= 0 AND (project_id IS NULL OR price_per_hour_minor = 0));
ALTER TABLE apps ADD COLUMN price_updated_at timestamptz;

ALTER TABLE workloads ADD COLUMN app_id text NOT NULL DEFAULT '';
ALTER TABLE workloads ADD COLUMN app_price_per_hour_minor bigint NOT NULL DEFAULT 0
    CHECK (app_price_per_hour_minor >= 0);

ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check
    CHECK (kind IN ('topup', 'usage', 'refund', 'adjustment', 'storage', 'app'));

-- One meter per priced workload, from when it started running to when it
-- ended or its allocation's meter stopped.
CREATE TABLE app_meters (
    workload_id          text PRIMARY KEY,
    allocation_id        text NOT NULL,
    project_id           text NOT NULL REFERENCES projects (id),
    user_id              text NOT NULL,
    app_id               text NOT NULL,
    price_per_hour_minor bigint NOT NULL CHECK (price_per_hour_minor > 0),
    currency             text NOT NULL,
    started_at           timestamptz NOT NULL,
    stopped_at           timestamptz CHECK (stopped_at >= started_at)
);
CREATE INDEX app_meters_running ON app_meters (project_id) WHERE stopped_at IS NULL;
CREATE INDEX app_meters_allocation ON app_meters (allocation_id) WHERE stopped_at IS NULL;
CREATE TRIGGER app_meters_keep BEFORE DELETE ON app_meters
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_removal('a meter is kept with its charges');
CREATE TRIGGER app_meters_no_truncate BEFORE TRUNCATE ON app_meters
    FOR EACH STATEMENT EXECUTE FUNCTION billing_refuse_removal('a meter is kept with its charges');

-- One row per charged window of an app meter: seconds start_seconds to
-- end_seconds of its running time.
CREATE TABLE app_charges (
    workload_id   text NOT NULL REFERENCES app_meters (workload_id),
    allocation_id text NOT NULL,
    project_id    text NOT NULL,
    currency      text NOT NULL,
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    start_seconds bigint NOT NULL,
    end_seconds   bigint NOT NULL,
    amount_minor  bigint NOT NULL CHECK (amount_minor >= 0),
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (workload_id, window_start),
    CHECK (window_end > window_start AND end_seconds >= start_seconds)
);
-- A budget period's spend.
CREATE INDEX app_charges_project_created ON app_charges (project_id, created_at);
CREATE TRIGGER app_charges_append_only BEFORE UPDATE OR DELETE ON app_charges
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER app_charges_no_truncate BEFORE TRUNCATE ON app_charges
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
REVOKE UPDATE, DELETE, TRUNCATE ON app_charges FROM gpuaas_app;
