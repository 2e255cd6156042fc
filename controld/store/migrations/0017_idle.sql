-- Placeholder on the health branch only: tern needs contiguous numbers, and
-- migration 0017 belongs to the idle item (issue 16). The idle branch's own
-- 0017_idle.sql replaces this file at merge.
SELECT 1;
