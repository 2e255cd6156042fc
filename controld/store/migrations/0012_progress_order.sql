-- Live progress: every phase once, in order (issue [3/7], section 2).

-- A task's phases are numbered by hostd from 1 (api.TaskProgress.PhaseSeq):
-- one row per number, however often or in whatever order reports arrive.
-- Rows of earlier versions are numbered in the order they were recorded.
ALTER TABLE node_task_events ADD COLUMN seq int;
UPDATE node_task_events e SET seq = n.seq
    FROM (SELECT id, row_number() OVER (PARTITION BY task_id ORDER BY id) AS seq FROM node_task_events) n
    WHERE e.id = n.id;
ALTER TABLE node_task_events ALTER COLUMN seq SET NOT NULL,
    ADD CONSTRAINT node_task_events_seq_positive CHECK (seq > 0);
CREATE UNIQUE INDEX node_task_events_task_seq_idx ON node_task_events (task_id, seq);

-- How many of the task's phases were published as alloc.progress events:
-- phases 1..progress_published, in order. A phase that arrives before an
-- earlier one waits for it (or for the result's log).
ALTER TABLE node_tasks ADD COLUMN progress_published int NOT NULL DEFAULT 0;
UPDATE node_tasks t SET progress_published = (SELECT count(*) FROM node_task_events e WHERE e.task_id = t.id);

-- The relay publishes a subject's events in order: a row waits while an
-- earlier row of its subject is still pending.
CREATE INDEX outbox_events_pending_subject_idx ON outbox_events (subject, id) WHERE state = 'pending';
