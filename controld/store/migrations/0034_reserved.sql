-- Placeholder for another helper's migration 0034 (tern refuses a gap):
-- the lead drops this file when the real 0034 merges.
SELECT 1;
