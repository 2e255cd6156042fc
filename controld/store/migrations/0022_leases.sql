-- Leases with a deadline (docs/decisions/0010-leases-and-fencing.md): one
-- row per singleton (the outbox relay, billing accrual, the idle evaluator,
-- node liveness) and per replica that receives node reports. A holder
-- renews its row before expires_at (the database's clock) and stops acting
-- before it could pass; a taker may take a row only once it has expired,
-- and each taking raises epoch: the fencing token every singleton write
-- checks, in its own transaction, is still current.
CREATE TABLE leases (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    epoch       bigint NOT NULL CHECK (epoch > 0),
    acquired_at timestamptz NOT NULL,
    -- renewed_at is the holder's last renewal: for a report receiver, the
    -- last moment it is known to have been able to record what it got.
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
