-- The image catalog (docs/images.md), owned by controld/images. An image
-- is fetched only by digest: repository@digest. Lifecycle and trust are
-- two independent state machines (controld/images/transitions.go).
-- project_id NULL is a platform image.
CREATE TABLE images (
    id           text PRIMARY KEY,
    name         text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    project_id   text REFERENCES projects (id),
    repository   text NOT NULL CHECK (repository <> ''),
    digest       text NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    source       text NOT NULL DEFAULT '',
    lifecycle    text NOT NULL CHECK (lifecycle IN ('published', 'promoted', 'deprecated', 'retired')),
    trust        text NOT NULL CHECK (trust IN ('unverified', 'verified', 'failed_verification', 'revoked')),
    trust_reason text NOT NULL DEFAULT '',
    platform     text NOT NULL DEFAULT '',
    size_bytes   bigint NOT NULL DEFAULT 0 CHECK (size_bytes >= 0),
    layers       integer NOT NULL DEFAULT 0 CHECK (layers >= 0),
    verified_at  timestamptz,
    published_by text NOT NULL REFERENCES users (id),
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);

-- A name is unique among the platform's images and among each project's.
CREATE UNIQUE INDEX images_platform_name ON images (name) WHERE project_id IS NULL;
CREATE UNIQUE INDEX images_project_name ON images (project_id, name) WHERE project_id IS NOT NULL;
