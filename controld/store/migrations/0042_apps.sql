-- Published apps (docs/apps.md, "Publishing apps";
-- docs/decisions/0051-published-apps.md): a checked app manifest of a
-- catalog image, pinned to that image (and so to its digest), the
-- platform's (project_id NULL) or a project's own. Its lifecycle is its
-- own; its trust is its image's, read with it, never copied here.
CREATE TABLE apps (
    id           text PRIMARY KEY,
    name         text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    project_id   text REFERENCES projects (id),
    image_id     text NOT NULL REFERENCES images (id),
    manifest     jsonb NOT NULL,
    lifecycle    text NOT NULL CHECK (lifecycle IN ('published', 'promoted', 'deprecated', 'retired')),
    published_by text NOT NULL REFERENCES users (id),
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);

-- A name is unique among the platform's apps and among each project's,
-- retired ones included (a name never means two manifests).
CREATE UNIQUE INDEX apps_platform_name ON apps (name) WHERE project_id IS NULL;
CREATE UNIQUE INDEX apps_project_name ON apps (project_id, name) WHERE project_id IS NOT NULL;
CREATE INDEX apps_image ON apps (image_id);
