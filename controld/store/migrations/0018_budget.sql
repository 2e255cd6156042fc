-- Budgets (issue 16, item 2): a spend cap per UTC calendar period and/or
-- an hourly burn cap, for a project (user_id '') or for one user in it.
-- controld/billing owns the table; creates are refused over a budget
-- (budget_exceeded) and the billing loop warns at 80 % and 100 %.
CREATE TABLE budgets (
    project_id                  text NOT NULL REFERENCES projects (id),
    -- '' is the project's own budget; else the user's within the project.
    user_id                     text NOT NULL DEFAULT '',
    period                      text CHECK (period IN ('day', 'week', 'month')),
    amount_minor                bigint CHECK (amount_minor > 0),
    burn_cap_minor_per_hour     bigint CHECK (burn_cap_minor_per_hour > 0),
    action                      text NOT NULL DEFAULT 'refuse' CHECK (action IN ('refuse', 'release')),
    currency                    text NOT NULL DEFAULT 'usd',
    -- The start of the period in which the 80 % warning and the 100 %
    -- notice went out: each crossing is told once, re-armed per period
    -- (and when the spend is back under, the cap having been raised).
    warned_period               timestamptz,
    capped_period               timestamptz,
    created_at                  timestamptz NOT NULL,
    updated_at                  timestamptz NOT NULL,
    updated_by                  text NOT NULL,
    PRIMARY KEY (project_id, user_id),
    CHECK ((period IS NULL) = (amount_minor IS NULL)),
    CHECK (amount_minor IS NOT NULL OR burn_cap_minor_per_hour IS NOT NULL)
);

-- A user's budget counts the usage of the allocations they created: the
-- meter records whose allocation it is.
ALTER TABLE billing_meters ADD COLUMN user_id text NOT NULL DEFAULT '';
UPDATE billing_meters m SET user_id = a.user_id FROM allocations a WHERE a.id = m.allocation_id;
CREATE INDEX billing_meters_running_user_idx ON billing_meters (project_id, user_id) WHERE stopped_at IS NULL;

-- A period's spend is the usage charged since it started.
CREATE INDEX usage_charges_project_created_idx ON usage_charges (project_id, created_at);
