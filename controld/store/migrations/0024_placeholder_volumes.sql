-- Placeholder on the volumes branch only: stands for migration 0024 of another
-- branch so that 0025_volumes.sql migrates here (tern refuses a gap). The
-- merge drops this file for the real 0024.
SELECT 1;
