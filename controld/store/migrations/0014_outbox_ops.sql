-- `gpuaas ops outbox drop` gives up on a dead event: the row stays, as
-- evidence next to its audit row, in state dropped.
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_state_check;
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_state_check
    CHECK (state IN ('pending', 'published', 'dead', 'dropped'));
CREATE INDEX outbox_events_dead_idx ON outbox_events (id) WHERE state = 'dead';

-- controld's /readyz compares the schema's version with the migrations it
-- carries; reading the version changes nothing.
GRANT SELECT ON schema_version TO gpuaas_app;
