-- Queued jobs (docs/jobs.md "Waiting for capacity", decision 0034): a job
-- created on an allocation that is not active yet waits in state
-- 'queued', with no node until its allocation is placed; controld starts
-- it when the allocation becomes active (controld/jobs/queue.go).
ALTER TABLE jobs ALTER COLUMN node_id DROP NOT NULL;
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('queued', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'lost'));
-- One unfinished job per allocation, a queued one included.
DROP INDEX jobs_one_open_per_allocation;
CREATE UNIQUE INDEX jobs_one_open_per_allocation ON jobs (allocation_id) WHERE state IN ('queued', 'starting', 'running');
