-- Each user's default project (issue [3/7] §1), set with `gpuaas project use`:
-- kept here rather than in a client's config so that it follows the user to
-- any machine and into commands over SSH. Written by controld/project.
-- A request that names no project acts in it; the user must still belong to
-- the project when a request uses it (checked then, like any project).
CREATE TABLE default_projects (
    user_id    text PRIMARY KEY REFERENCES users (id),
    project_id text NOT NULL REFERENCES projects (id),
    set_at     timestamptz NOT NULL
);

-- Users who joined projects before there were defaults get the rule new
-- users get: their first project is their default.
INSERT INTO default_projects (user_id, project_id, set_at)
SELECT DISTINCT ON (user_id) user_id, project_id, now()
FROM project_members
ORDER BY user_id, added_at, project_id;
