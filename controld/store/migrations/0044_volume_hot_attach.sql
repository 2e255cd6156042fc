-- Attaching a volume to a running allocation and detaching it without
-- releasing (docs/volumes.md, "Attaching to a running allocation";
-- docs/decisions/0064-volume-attach-running.md): while the allocation's
-- node mounts or unmounts it, a volume is attaching or detaching, held for
-- that allocation (allocation_id set) so that nothing else takes it.
ALTER TABLE volumes DROP CONSTRAINT volumes_state_check;
ALTER TABLE volumes ADD CONSTRAINT volumes_state_check
    CHECK (state IN ('creating', 'ready', 'attaching', 'attached', 'detaching', 'deleting', 'deleted', 'failed'));
ALTER TABLE volumes DROP CONSTRAINT volumes_attached_check;
ALTER TABLE volumes ADD CONSTRAINT volumes_attached_check
    CHECK ((state IN ('attached', 'attaching', 'detaching')) = (allocation_id IS NOT NULL OR session_key IS NOT NULL));
-- A volume is attaching or detaching only for an allocation.
ALTER TABLE volumes ADD CONSTRAINT volumes_hot_check
    CHECK (state NOT IN ('attaching', 'detaching') OR allocation_id IS NOT NULL);
