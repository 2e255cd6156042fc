-- Health gating (issue 16, item 4). A slot can be quarantined — by an
-- operator (`gpuaas node quarantine`) or by controld when hostd reports a
-- GPU fault (an XID in the kernel log) — independently of its state: a
-- reserved slot stays reserved by its allocation while quarantined, and a
-- quarantined free slot is never handed out until it is cleared.
ALTER TABLE slots
    ADD COLUMN quarantined_at    timestamptz,
    ADD COLUMN quarantine_reason text NOT NULL DEFAULT '',
    ADD COLUMN quarantined_by    text NOT NULL DEFAULT '';

-- The GPU faults nodes reported, once each: hostd resends a fault until
-- controld acknowledges it, and a resend finds its row here and changes
-- nothing.
CREATE TABLE gpu_faults (
    node_id       text NOT NULL REFERENCES nodes (id),
    gpu_pci       text NOT NULL,
    xid           int NOT NULL,
    at            timestamptz NOT NULL,
    message       text NOT NULL DEFAULT '',
    allocation_id text NOT NULL DEFAULT '',
    received_at   timestamptz NOT NULL,
    PRIMARY KEY (node_id, gpu_pci, xid, at)
);

-- The free counts of slot_groups (migration 0015) leave quarantined slots
-- out: a quarantined free slot is neither free nor busy, so placement's
-- candidates never count it and a bare-metal node with one is never
-- wholly free. Quarantining or clearing a slot is an UPDATE of slots, so
-- the update trigger moves it out of or back into the free count.
CREATE OR REPLACE FUNCTION slots_counted_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM slot_groups_apply(array_agg(node_id), array_agg(numa_node), array_agg(free), array_agg(busy))
    FROM (SELECT node_id, numa_node, count(*) FILTER (WHERE state = 'free' AND quarantined_at IS NULL)::int AS free,
                 count(*) FILTER (WHERE state IN ('reserved', 'pending'))::int AS busy
          FROM new_slots GROUP BY node_id, numa_node) c;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION slots_counted_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM slot_groups_apply(array_agg(node_id), array_agg(numa_node), array_agg(free), array_agg(busy))
    FROM (SELECT node_id, numa_node, sum(free)::int AS free, sum(busy)::int AS busy
          FROM (SELECT node_id, numa_node, (state = 'free' AND quarantined_at IS NULL)::int AS free,
                       (state IN ('reserved', 'pending'))::int AS busy FROM new_slots
                UNION ALL
                SELECT node_id, numa_node, -(state = 'free' AND quarantined_at IS NULL)::int,
                       -(state IN ('reserved', 'pending'))::int FROM old_slots) u
          GROUP BY node_id, numa_node) c
    WHERE free <> 0 OR busy <> 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION slots_counted_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM slot_groups_apply(array_agg(node_id), array_agg(numa_node), array_agg(free), array_agg(busy))
    FROM (SELECT node_id, numa_node, -count(*) FILTER (WHERE state = 'free' AND quarantined_at IS NULL)::int AS free,
                 -count(*) FILTER (WHERE state IN ('reserved', 'pending'))::int AS busy
          FROM old_slots GROUP BY node_id, numa_node) c;
    RETURN NULL;
END $$;
