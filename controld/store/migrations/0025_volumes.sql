-- Volumes (docs/volumes.md): a project's persistent data on one node, an
-- ext4 image there (docs/decisions/0016-volumes-ext4-images.md).
-- controld/volumes owns the table; the node makes, grows and removes
-- the image through the volume.* tasks.
CREATE TABLE volumes (
    id            text PRIMARY KEY,
    project_id    text NOT NULL REFERENCES projects (id),
    name          text NOT NULL,
    node_id       text NOT NULL REFERENCES nodes (id),
    -- The node's name when the volume was made, for display.
    node_name     text NOT NULL,
    size_bytes    bigint NOT NULL CHECK (size_bytes > 0),
    -- The size a resize in progress asks for.
    resizing_to   bigint CHECK (resizing_to > size_bytes),
    state         text NOT NULL CHECK (state IN ('creating', 'ready', 'attached', 'deleting', 'deleted', 'failed')),
    reason        text NOT NULL DEFAULT '',
    -- The allocation it is attached to and where it is mounted there.
    allocation_id text REFERENCES allocations (id),
    mount_path    text NOT NULL DEFAULT '',
    -- The node task last asked of the volume: its settler finds the
    -- volume by it, and a result of an older task changes nothing.
    task_id       text,
    created_by    text NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    deleted_at    timestamptz,
    CHECK ((state = 'attached') = (allocation_id IS NOT NULL))
);

-- A name is unique among a project's volumes that are not deleted.
CREATE UNIQUE INDEX volumes_project_name_idx ON volumes (project_id, name) WHERE state <> 'deleted';
-- What a node holds: its free space for new volumes, drain, node get.
CREATE INDEX volumes_node_idx ON volumes (node_id) WHERE state <> 'deleted';
-- A volume is attached to one allocation at a time, and an allocation
-- mounts a volume once.
CREATE INDEX volumes_allocation_idx ON volumes (allocation_id) WHERE allocation_id IS NOT NULL;
CREATE INDEX volumes_task_idx ON volumes (task_id) WHERE task_id IS NOT NULL;
