-- Placeholder (tern refuses a gap in the numbering): another change of this
-- sitting owns 0038; drop this file when the real one merges.
SELECT 1;
