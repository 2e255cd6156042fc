-- User administration, login protection and one-time OIDC exchanges
-- (issue [1/7], items 4, 5 and 9). controld/identity owns every table here.

-- A local user may exist without a password: invited, not yet redeemed.
-- Any user but a service principal may carry a linked OIDC identity
-- (`gpuaas admin user link`), so a local account can also log in through
-- the IdP; an oidc user always has one.
ALTER TABLE users DROP CONSTRAINT users_check;
ALTER TABLE users DROP CONSTRAINT users_check1;
ALTER TABLE users ADD CONSTRAINT users_password_is_local
    CHECK (password_hash IS NULL OR provider = 'local');
ALTER TABLE users ADD CONSTRAINT users_oidc_link_whole
    CHECK ((oidc_subject IS NULL) = (oidc_issuer IS NULL));
ALTER TABLE users ADD CONSTRAINT users_oidc_has_subject
    CHECK (provider <> 'oidc' OR oidc_subject IS NOT NULL);
ALTER TABLE users ADD CONSTRAINT users_service_unlinked
    CHECK (provider <> 'service' OR oidc_subject IS NULL);
DROP INDEX users_oidc_key;
CREATE UNIQUE INDEX users_oidc_key ON users (oidc_issuer, oidc_subject);

-- disabled_at: set by `gpuaas admin user disable`; a disabled user can
-- neither log in nor use a session. last_login_at: the last interactive
-- login (password, invite or OIDC).
ALTER TABLE users ADD COLUMN disabled_at timestamptz;
ALTER TABLE users ADD COLUMN last_login_at timestamptz;

-- One pending invite per user: a re-invite replaces it, redemption
-- deletes it. Only the SHA-256 of the code is kept.
CREATE TABLE user_invites (
    user_id    text PRIMARY KEY REFERENCES users (id),
    code_hash  bytea NOT NULL UNIQUE,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX user_invites_expires_idx ON user_invites (expires_at);

-- Failed logins per key ('account:<lower email>' or 'source:<address>'),
-- shared by every controld replica. An attempt is counted before the
-- password is checked (so concurrent guesses cannot overtake the limit)
-- and the row is deleted by a success.
CREATE TABLE login_attempts (
    key             text PRIMARY KEY,
    failures        int NOT NULL CHECK (failures >= 0),
    last_failure_at timestamptz NOT NULL,
    locked_until    timestamptz
);
CREATE INDEX login_attempts_last_idx ON login_attempts (last_failure_at);

-- Every ID token exchanged for a session, until it expires: a second
-- exchange of the same token is refused.
CREATE TABLE oidc_exchanged_tokens (
    token_hash   bytea PRIMARY KEY,
    issuer       text NOT NULL,
    subject      text NOT NULL,
    exchanged_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX oidc_exchanged_tokens_expires_idx ON oidc_exchanged_tokens (expires_at);
