-- Workloads' readiness and their own GPUs (docs/apps.md, "Readiness" and
-- "Metering"; docs/decisions/0048-readiness-and-workload-gpus.md).
-- gpus: how many GPUs the container has (0: none, a manifest's gpus: 0);
-- its GPU-seconds are these × its running time. Rows before this had all
-- of their allocation's.
ALTER TABLE workloads ADD COLUMN gpus int CHECK (gpus >= 0);
UPDATE workloads w SET gpus = a.gpus FROM allocations a WHERE a.id = w.allocation_id;
ALTER TABLE workloads ALTER COLUMN gpus SET NOT NULL;
-- ready_by: when a workload with a readiness probe that is not ready is
-- failed (controld's clock: when it first saw the container running, plus
-- the probe's start deadline); ready_at: when its probe passed.
ALTER TABLE workloads ADD COLUMN ready_by timestamptz;
ALTER TABLE workloads ADD COLUMN ready_at timestamptz;
