-- Verifications run in the background (controld/images/verifier.go): a
-- request is recorded here, and any replica claims it, fetches the image
-- without a request's deadline and records the result. A claim holds the
-- row until verify_due_at (its lease); a registry error defers the next
-- attempt to verify_due_at with the error kept in verify_error, shown by
-- `gpuaas image get`. No request pending: verify_requested_at IS NULL.
ALTER TABLE images
    ADD COLUMN verify_requested_at timestamptz,
    ADD COLUMN verify_requested_by text REFERENCES users (id),
    ADD COLUMN verify_due_at       timestamptz,
    ADD COLUMN verify_attempts     integer NOT NULL DEFAULT 0 CHECK (verify_attempts >= 0),
    ADD COLUMN verify_error        text NOT NULL DEFAULT '',
    ADD CONSTRAINT images_verify_request CHECK (
        (verify_requested_at IS NULL) = (verify_due_at IS NULL)
        AND (verify_requested_at IS NULL) = (verify_requested_by IS NULL));

CREATE INDEX images_verify_due ON images (verify_due_at) WHERE verify_requested_at IS NOT NULL;
