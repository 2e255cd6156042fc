-- Issue 12 §3: a session's state. 'interrupted' is a session its gateway
-- left running when it stopped without ending it (a crash), found when
-- that gateway started again.
ALTER TABLE terminal_sessions ADD COLUMN state text NOT NULL DEFAULT 'running'
    CHECK (state IN ('running', 'ended', 'interrupted'));
UPDATE terminal_sessions SET state = 'ended' WHERE ended_at IS NOT NULL;
ALTER TABLE terminal_sessions ADD CONSTRAINT terminal_sessions_state_ended
    CHECK ((state = 'running') = (ended_at IS NULL));
CREATE INDEX terminal_sessions_running_idx ON terminal_sessions (gateway) WHERE state = 'running';
