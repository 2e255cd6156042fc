-- Volume sessions in the session index (docs/volumes.md, "Data without a
-- GPU"; docs/decisions/0049-volume-sessions-listed-and-priced.md): an
-- sftp session to a volume (`sftp <volume-id>@gateway`) is a row of
-- terminal_sessions like any other, naming its volume where the others
-- name an allocation. controld/sessions writes it when controld/volumes
-- holds or lets go of the volume for the session.
ALTER TABLE terminal_sessions
    ADD COLUMN volume_id text REFERENCES volumes (id),
    ALTER COLUMN allocation_id DROP NOT NULL;
ALTER TABLE terminal_sessions ADD CONSTRAINT terminal_sessions_target_check
    CHECK ((allocation_id IS NULL) <> (volume_id IS NULL));
-- A volume is in one session at a time (volumes.session_key): one running
-- row per volume, which is also how its end finds it.
CREATE UNIQUE INDEX terminal_sessions_volume_running_idx ON terminal_sessions (volume_id)
    WHERE state = 'running' AND volume_id IS NOT NULL;
CREATE INDEX terminal_sessions_volume_idx ON terminal_sessions (volume_id, started_at DESC)
    WHERE volume_id IS NOT NULL;
