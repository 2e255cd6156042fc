-- Retries of lost jobs (docs/jobs.md "Retries", decision 0045): a job
-- the platform lost (hostd restarted and could not re-attach it, or the
-- node stopped answering) is started again on its allocation, at most
-- retries times. attempt counts its starts from 1.
ALTER TABLE jobs ADD COLUMN retries int NOT NULL DEFAULT 0 CHECK (retries BETWEEN 0 AND 10);
ALTER TABLE jobs ADD COLUMN attempt int NOT NULL DEFAULT 1 CHECK (attempt BETWEEN 1 AND 11);
