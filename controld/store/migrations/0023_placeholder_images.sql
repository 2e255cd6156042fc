-- Placeholder on branch images only: migrations are numbered without gaps,
-- and 0023 belongs to another branch of this sitting. Delete this file when
-- merging (the other branch brings the real 0023).
SELECT 1;
