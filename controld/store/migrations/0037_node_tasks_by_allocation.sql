-- An allocation's tasks by allocation (docs/architecture.md, "Tasks"):
-- alloc.get's timeline (controld/tasks, timelineSQL) and the per-allocation
-- ordering of deliveries filter node_tasks by allocation_id, which had no
-- index, so every read scanned the whole table — its cost grew with every
-- task any allocation ever ran (bench/README.md, "alloc.get's CPU":
-- 2.5–5.6 ms of Postgres CPU per read at 100,000 other tasks, 0.17 ms
-- with this index).
CREATE INDEX node_tasks_allocation_idx ON node_tasks (allocation_id, created_at) WHERE allocation_id IS NOT NULL;
