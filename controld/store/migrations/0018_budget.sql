-- Placeholder on the health branch only: tern needs contiguous numbers, and
-- migration 0018 belongs to the budget item (issue 16). The budget branch's own
-- 0018_budget.sql replaces this file at merge.
SELECT 1;
