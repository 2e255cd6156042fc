-- Volume billing (docs/volumes.md, docs/decisions/0024-volume-meters.md):
-- a volume is charged by the GiB-hour of its provisioned size, in the
-- accrual windows of the allocation meters, on the project's ledger
-- chain. controld/billing owns volume_meters and volume_charges;
-- controld/catalog owns volume_prices.

-- A storage window books a ledger entry of kind storage (a debit).
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check
    CHECK (kind IN ('topup', 'usage', 'refund', 'adjustment', 'storage'));

-- The price of a GiB of volume for a month of 730 hours, per currency.
-- Operators change it with an UPDATE; a meter keeps the price it started
-- at (a resize starts a new meter at the price of that moment).
CREATE TABLE volume_prices (
    currency                  text PRIMARY KEY,
    price_per_gib_month_minor bigint NOT NULL CHECK (price_per_gib_month_minor >= 0),
    updated_at                timestamptz NOT NULL DEFAULT now()
);
INSERT INTO volume_prices (currency, price_per_gib_month_minor) VALUES ('usd', 10);

-- One segment of a volume's charging: from when it became ready (or was
-- resized) at one size, until it was resized, removed or lost. meter_id
-- is the volume's id and the segment's number ("vol-….2"). A volume has
-- at most one running segment.
CREATE TABLE volume_meters (
    meter_id                  text PRIMARY KEY,
    volume_id                 text NOT NULL REFERENCES volumes (id),
    project_id                text NOT NULL REFERENCES projects (id),
    -- Who created the volume: their budget counts it.
    user_id                   text NOT NULL,
    size_bytes                bigint NOT NULL CHECK (size_bytes > 0),
    price_per_gib_month_minor bigint NOT NULL CHECK (price_per_gib_month_minor >= 0),
    currency                  text NOT NULL,
    started_at                timestamptz NOT NULL,
    stopped_at                timestamptz,
    CHECK (stopped_at IS NULL OR stopped_at >= started_at)
);
CREATE UNIQUE INDEX volume_meters_running_volume_idx ON volume_meters (volume_id) WHERE stopped_at IS NULL;
CREATE INDEX volume_meters_volume_idx ON volume_meters (volume_id);
CREATE INDEX volume_meters_running_idx ON volume_meters (project_id, user_id) WHERE stopped_at IS NULL;

-- One charged window of one volume segment, as usage_charges is for
-- allocations: (meter_id, window_start) is unique, so a retried or
-- concurrent accrual charges a window once, and the key carries
-- window_end and end_seconds so that the next window's start is read
-- from the index alone.
CREATE TABLE volume_charges (
    meter_id      text NOT NULL REFERENCES volume_meters (meter_id),
    volume_id     text NOT NULL,
    project_id    text NOT NULL,
    currency      text NOT NULL,
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    start_seconds bigint NOT NULL,
    end_seconds   bigint NOT NULL,
    amount_minor  bigint NOT NULL CHECK (amount_minor >= 0),
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (meter_id, window_start) INCLUDE (window_end, end_seconds),
    CHECK (window_end > window_start AND end_seconds >= start_seconds)
);
-- A budget period's spend; a volume's windows for `billing usage --volume`.
CREATE INDEX volume_charges_project_created_idx ON volume_charges (project_id, created_at);
CREATE INDEX volume_charges_volume_idx ON volume_charges (volume_id, window_start);
CREATE TRIGGER volume_charges_append_only BEFORE UPDATE OR DELETE ON volume_charges
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER volume_charges_no_truncate BEFORE TRUNCATE ON volume_charges
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
REVOKE UPDATE, DELETE, TRUNCATE ON volume_charges FROM gpuaas_app;

-- Volumes ready or attached when billing of volumes arrives are charged
-- from now on (nothing before: they were free until then).
INSERT INTO volume_meters (meter_id, volume_id, project_id, user_id, size_bytes, price_per_gib_month_minor, currency, started_at)
SELECT v.id || '.1', v.id, v.project_id, v.created_by, v.size_bytes, p.price_per_gib_month_minor, p.currency, now()
FROM volumes v JOIN volume_prices p ON p.currency = 'usd'
WHERE v.state IN ('ready', 'attached');
