-- Delegated sessions: short-lived sessions sshgate opens for a user who
-- authenticated to it with an SSH user certificate (gate.user_token). They
-- act as the user for ordinary API calls but cannot mint credentials
-- (SSH certificates, service tokens) nor reach ops.* or gate.* endpoints.
ALTER TABLE sessions ADD COLUMN delegated boolean NOT NULL DEFAULT false;
