-- Placeholder on branch images only: migrations are numbered without gaps,
-- and 0025 belongs to another branch of this sitting. Delete this file when
-- merging (the other branch brings the real 0025).
SELECT 1;
