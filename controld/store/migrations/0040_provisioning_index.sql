-- A create's funds check sums what the project's provisioning allocations
-- cost, under the project's funds lock (docs/decisions/0042-funds-lock-last.md).
-- allocations_project_idx walks every allocation the project ever had; this
-- index holds only those provisioning (a few at any time), so the statement
-- run under the lock costs what provisions now, not the project's history.
CREATE INDEX allocations_provisioning_idx ON allocations (project_id) WHERE state = 'provisioning';
