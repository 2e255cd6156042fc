-- Placement reads free capacity from an index instead of aggregating
-- every free slot of the fleet per request. slot_groups holds one row per
-- (node, NUMA node) and one per node (numa_node = -1, its totals) with
-- how many of their slots are free and how many busy (reserved or
-- pending), next to the node's shape, GPU model and readiness. Triggers
-- on slots and nodes keep it in the same transaction as the change.
--
-- A reservation never waits on another one: concurrent placements take
-- different slots of one group under SKIP LOCKED, and a count row updated
-- by an open transaction would make the next one wait for it. So a slots
-- trigger that finds a count row locked records its change in
-- slot_group_deltas (an insert, which waits on nobody), and whoever next
-- locks that row folds the committed deltas into it. A count row plus its
-- committed deltas is always exact; placement reads the rows through the
-- index and the few rows with deltas apart (controld/node/placement.go).
CREATE TABLE slot_groups (
    node_id   text NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    numa_node int NOT NULL, -- -1: the whole node
    shape     text NOT NULL,
    gpu_model text NOT NULL,
    ready     boolean NOT NULL,
    free      int NOT NULL,
    busy      int NOT NULL,
    PRIMARY KEY (node_id, numa_node)
);
-- Best fit: the fullest group (fewest free slots) that still fits first.
CREATE INDEX slot_groups_numa_idx ON slot_groups (shape, gpu_model, free, node_id, numa_node)
    WHERE ready AND numa_node >= 0;
CREATE INDEX slot_groups_node_idx ON slot_groups (shape, gpu_model, free, node_id)
    WHERE ready AND numa_node = -1;

CREATE TABLE slot_group_deltas (
    id        bigserial PRIMARY KEY,
    node_id   text NOT NULL,
    numa_node int NOT NULL,
    free      int NOT NULL,
    busy      int NOT NULL
);
CREATE INDEX slot_group_deltas_key_idx ON slot_group_deltas (node_id, numa_node);

-- slot_groups_apply adds changes of free and busy counts per (node, NUMA
-- node) to slot_groups, with the node totals they imply: to the rows it
-- can lock without waiting (folding in their committed deltas), as deltas
-- for the others.
CREATE FUNCTION slot_groups_apply(node_ids text[], numas int[], frees int[], busies int[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF node_ids IS NULL THEN
        RETURN;
    END IF;
    WITH per_group AS (
        SELECT c.node_id, c.numa_node, sum(c.free)::int AS free, sum(c.busy)::int AS busy
        FROM unnest(node_ids, numas, frees, busies) AS c (node_id, numa_node, free, busy)
        GROUP BY c.node_id, c.numa_node
    ), changes AS (
        SELECT * FROM per_group
        UNION ALL
        SELECT node_id, -1, sum(free)::int, sum(busy)::int FROM per_group GROUP BY node_id
    ), created AS (
        -- A node's first slots: its rows, with their counts (the insert
        -- waits only on a concurrent first insert of the same row).
        INSERT INTO slot_groups (node_id, numa_node, shape, gpu_model, ready, free, busy)
        SELECT c.node_id, c.numa_node, n.shape, n.gpu_model, n.state = 'ready', c.free, c.busy
        FROM changes c JOIN nodes n ON n.id = c.node_id
        WHERE NOT EXISTS (SELECT 1 FROM slot_groups g WHERE g.node_id = c.node_id AND g.numa_node = c.numa_node)
        ON CONFLICT DO NOTHING
        RETURNING node_id, numa_node
    ), nonzero AS (
        SELECT * FROM changes c
        WHERE (c.free <> 0 OR c.busy <> 0)
          AND NOT EXISTS (SELECT 1 FROM created k WHERE k.node_id = c.node_id AND k.numa_node = c.numa_node)
    ), locked AS MATERIALIZED (
        SELECT g.node_id, g.numa_node FROM nonzero c
        JOIN slot_groups g ON g.node_id = c.node_id AND g.numa_node = c.numa_node
        ORDER BY g.node_id, g.numa_node
        FOR UPDATE OF g SKIP LOCKED
    ), folded AS (
        DELETE FROM slot_group_deltas d USING locked l
        WHERE d.node_id = l.node_id AND d.numa_node = l.numa_node
        RETURNING d.node_id, d.numa_node, d.free, d.busy
    ), updated AS (
        -- (A data-modifying CTE runs whether read or not.)
        UPDATE slot_groups g SET free = g.free + s.free, busy = g.busy + s.busy
        FROM (SELECT u.node_id, u.numa_node, sum(u.free)::int AS free, sum(u.busy)::int AS busy
              FROM (SELECT c.* FROM nonzero c JOIN locked l ON l.node_id = c.node_id AND l.numa_node = c.numa_node
                    UNION ALL SELECT * FROM folded) u
              GROUP BY u.node_id, u.numa_node) s
        WHERE g.node_id = s.node_id AND g.numa_node = s.numa_node
    )
    INSERT INTO slot_group_deltas (node_id, numa_node, free, busy)
    SELECT c.node_id, c.numa_node, c.free, c.busy FROM nonzero c
    WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.node_id = c.node_id AND l.numa_node = c.numa_node);
END $$;

CREATE FUNCTION slots_counted_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM slot_groups_apply(array_agg(node_id), array_agg(numa_node), array_agg(free), array_agg(busy))
    FROM (SELECT node_id, numa_node, count(*) FILTER (WHERE state = 'free')::int AS free,
                 count(*) FILTER (WHERE state IN ('reserved', 'pending'))::int AS busy
          FROM new_slots GROUP BY node_id, numa_node) c;
    RETURN NULL;
END $$;

CREATE FUNCTION slots_counted_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM slot_groups_apply(array_agg(node_id), array_agg(numa_node), array_agg(free), array_agg(busy))
    FROM (SELECT node_id, numa_node, sum(free)::int AS free, sum(busy)::int AS busy
          FROM (SELECT node_id, numa_node, (state = 'free')::int AS free,
                       (state IN ('reserved', 'pending'))::int AS busy FROM new_slots
                UNION ALL
                SELECT node_id, numa_node, -(state = 'free')::int,
                       -(state IN ('reserved', 'pending'))::int FROM old_slots) u
          GROUP BY node_id, numa_node) c
    WHERE free <> 0 OR busy <> 0;
    RETURN NULL;
END $$;

CREATE FUNCTION slots_counted_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM slot_groups_apply(array_agg(node_id), array_agg(numa_node), array_agg(free), array_agg(busy))
    FROM (SELECT node_id, numa_node, -count(*) FILTER (WHERE state = 'free')::int AS free,
                 -count(*) FILTER (WHERE state IN ('reserved', 'pending'))::int AS busy
          FROM old_slots GROUP BY node_id, numa_node) c;
    RETURN NULL;
END $$;

CREATE TRIGGER slots_counted_insert AFTER INSERT ON slots
    REFERENCING NEW TABLE AS new_slots FOR EACH STATEMENT EXECUTE FUNCTION slots_counted_insert();
CREATE TRIGGER slots_counted_update AFTER UPDATE ON slots
    REFERENCING OLD TABLE AS old_slots NEW TABLE AS new_slots FOR EACH STATEMENT EXECUTE FUNCTION slots_counted_update();
CREATE TRIGGER slots_counted_delete AFTER DELETE ON slots
    REFERENCING OLD TABLE AS old_slots FOR EACH STATEMENT EXECUTE FUNCTION slots_counted_delete();

-- A node's shape, GPU model and readiness travel with its count rows.
CREATE FUNCTION nodes_counted_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE slot_groups SET shape = NEW.shape, gpu_model = NEW.gpu_model, ready = NEW.state = 'ready'
    WHERE node_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER nodes_counted_update AFTER UPDATE ON nodes FOR EACH ROW
    WHEN ((OLD.state = 'ready') IS DISTINCT FROM (NEW.state = 'ready')
          OR OLD.shape IS DISTINCT FROM NEW.shape OR OLD.gpu_model IS DISTINCT FROM NEW.gpu_model)
    EXECUTE FUNCTION nodes_counted_update();

-- The slots there are already.
INSERT INTO slot_groups (node_id, numa_node, shape, gpu_model, ready, free, busy)
SELECT s.node_id, coalesce(s.numa_node, -1), n.shape, n.gpu_model, n.state = 'ready',
       count(*) FILTER (WHERE s.state = 'free'), count(*) FILTER (WHERE s.state IN ('reserved', 'pending'))
FROM slots s JOIN nodes n ON n.id = s.node_id
GROUP BY GROUPING SETS ((s.node_id, n.shape, n.gpu_model, n.state, s.numa_node), (s.node_id, n.shape, n.gpu_model, n.state));
