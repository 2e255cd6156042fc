-- Placeholder: 0023 is another change's number this round (tern refuses a
-- gap). When merging, the real 0023 replaces this file.
SELECT 1;
